package chain

import "github.com/batonhq/baton/sandbox/runspec"

// Network modes of a run.
const (
	// NetNone: a network namespace with loopback only.
	NetNone = "none"
	// NetProxy: loopback only too, plus the egress proxy and DNS stub
	// that runner-outer serves on sockets inside the namespace; for an
	// allowlist of names.
	NetProxy = "proxy"
	// NetPasta: NetProxy, plus pasta's tap and an nft ruleset letting
	// through only the allowlist's CIDR entries.
	NetPasta = "pasta"
)

// NetMode is the network a spec needs.
func NetMode(n runspec.Network) string {
	switch {
	case len(n.Allow) == 0:
		return NetNone
	case len(n.Prefixes()) > 0:
		return NetPasta
	}
	return NetProxy
}

// The run CA's files in the sandbox's /etc, with a run's secrets:
// CAFile its certificate, CABundleFile the host's roots and it.
const (
	CAFile       = "baton-egress-ca.pem"
	CABundleFile = "baton-egress-ca-bundle.pem"
)

// CAEnv points the agent's TLS libraries at the run's CA, beside the
// host's roots: OpenSSL (curl, git, Python), Go, Python's requests, git,
// and Node (whose own roots stay; it adds these).
func CAEnv() []string {
	bundle, ca := "/etc/"+CABundleFile, "/etc/"+CAFile
	return []string{
		"SSL_CERT_FILE=" + bundle, "CURL_CA_BUNDLE=" + bundle, "REQUESTS_CA_BUNDLE=" + bundle,
		"GIT_SSL_CAINFO=" + bundle, "NODE_EXTRA_CA_CERTS=" + ca,
	}
}

// Addresses of the egress services on the sandbox's loopback.
const (
	ProxyAddr = "127.0.0.1:3128"
	DNSAddr   = "127.0.0.1:53"
	DNSServer = "127.0.0.1"
)

// ProxyEnv is what points the agent's HTTP clients at the egress proxy.
func ProxyEnv() []string {
	url := "http://" + ProxyAddr
	return []string{
		"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	}
}
