package egress

import (
	"crypto"
	"errors"
	"net"
)

// The crypto of intercepted tunnels, given by SetTLS. Neither crypto/tls
// nor crypto/x509 is linked here: their package init (x509's and its key
// types' with it) costs each process that links them memory and start
// time, and every run keeps two baton-runner processes alive and starts
// six, most of them without secrets (cmd/baton-runner's TestDeps).
var given struct {
	newCA    func(hosts []string) (CA, error)
	parseCA  func(b []byte) (CA, error)
	upstream func(upstreamCA string) (func(c net.Conn, host string) (net.Conn, string, error), error)
	server   func(c net.Conn, chain [][]byte, key crypto.Signer) (net.Conn, error)
}

// CA is a run's own certificate authority (package sandbox/internal/tlsterm's):
// the sandbox trusts its certificate, runner-outer alone holds its key,
// and the proxy shows the agent a certificate it signs for each secret's
// host it terminates TLS for.
type CA interface {
	// CertPEM is the CA's certificate, for the sandbox's trust.
	CertPEM() []byte
	// MarshalPEM is the certificate and the key, for runner-outer's own
	// hand-over across its exec; nothing else may see it.
	MarshalPEM() ([]byte, error)
	// Leaf is the chain (the leaf first) shown the agent for host, and
	// the leaf's key.
	Leaf(host string) ([][]byte, crypto.Signer, error)
}

// SetTLS gives the proxy the crypto it intercepts secrets' hosts with:
// newCA makes a run's CA for hosts and parseCA reads what its MarshalPEM
// wrote; upstream makes the client that completes TLS to a host, checked
// against the host's roots and upstreamCA, and returns the protocol it
// chose; server completes TLS with the agent. Package sandbox/secrettls
// calls it at init; the connections they return have CloseWrite
// (close_notify).
func SetTLS[C CA](newCA func(hosts []string) (C, error), parseCA func(b []byte) (C, error),
	upstream func(upstreamCA string) (func(c net.Conn, host string) (net.Conn, string, error), error),
	server func(c net.Conn, chain [][]byte, key crypto.Signer) (net.Conn, error)) {
	given.newCA = func(hosts []string) (CA, error) { return asCA(newCA(hosts)) }
	given.parseCA = func(b []byte) (CA, error) { return asCA(parseCA(b)) }
	given.upstream, given.server = upstream, server
}

// asCA keeps a failed C from becoming a non-nil CA.
func asCA[C CA](c C, err error) (CA, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ErrNoTLS: the running binary cannot intercept a secret's host.
var ErrNoTLS = errors.New("egress: this binary links no TLS, which a run with secrets needs (baton does, baton-runner does not: a worker starts runs with secrets from baton)")

// TLSReady is ErrNoTLS unless SetTLS was called.
func TLSReady() error {
	if given.newCA == nil || given.server == nil {
		return ErrNoTLS
	}
	return nil
}

// NewCA makes a run's CA for hosts (lower-case names).
func NewCA(hosts []string) (CA, error) {
	if err := TLSReady(); err != nil {
		return nil, err
	}
	return given.newCA(hosts)
}

// ParseCA reads what a CA's MarshalPEM wrote.
func ParseCA(b []byte) (CA, error) {
	if err := TLSReady(); err != nil {
		return nil, err
	}
	return given.parseCA(b)
}

// closeWriter is a connection whose write side closes alone.
type closeWriter interface {
	net.Conn
	CloseWrite() error
}
