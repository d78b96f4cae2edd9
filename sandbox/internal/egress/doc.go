// Package egress owns the sandbox's way out: the policy that decides which
// names and addresses an agent may reach, the HTTP proxy (CONNECT and
// plain HTTP) that carries its traffic, and the DNS stub that answers its
// queries. runner-outer serves both on sockets runner-inner created
// inside the sandbox's network namespace, so the agent reaches them on its
// own loopback while every outbound connection is made, and every name
// resolved, on the host side, after the policy said yes.
//
// The policy: a name must be on the allowlist (exact, or under a
// ".domain" entry); an address must be public unless a CIDR entry lists
// it; loopback, unspecified, multicast and the host's own addresses are
// refused always. Names resolve once, and the proxy dials the addresses
// it checked, so a name cannot be rebound to a forbidden address between
// check and use. The DNS stub answers A and AAAA queries for allowed
// names only, with the addresses the proxy would accept, and REFUSED for
// every other name without resolving it, so a query cannot carry data
// out of the sandbox through the host's resolver.
//
// Secrets (Secrets, CA): the agent holds a placeholder for each, never its
// value. A CONNECT to a host a secret is for is not a tunnel: the proxy
// checks the host's certificate against the host's roots, shows the agent
// a certificate of the run's CA (which only that sandbox trusts, and whose
// key never enters it), and passes each request of the connection on with
// the value in place of the placeholder in the secret's header. A
// placeholder seen where its secret may not go (another host, plain HTTP,
// a CONNECT target) fails its request with 403, recorded through Logf.
// Other hosts keep their end-to-end tunnel. The TLS and the CA themselves
// are given by SetTLS (package sandbox/secrettls, in the baton binary
// only), so that baton-runner links neither crypto/tls nor crypto/x509.
package egress
