package egress

import (
	"crypto"
	"crypto/x509"
	"errors"
	"net"
)

// The TLS of intercepted tunnels, given by SetTLS. crypto/tls is not
// linked here: its package init costs each process that links it memory,
// and every run keeps two baton-runner processes alive, most of them
// without secrets (cmd/baton-runner's TestDeps).
var (
	tlsClient func(c net.Conn, host string, roots *x509.CertPool) (net.Conn, string, error)
	tlsServer func(c net.Conn, chain [][]byte, key crypto.Signer) (net.Conn, error)
)

// SetTLS gives the proxy the TLS it intercepts secrets' hosts with:
// client completes TLS to a host and returns the protocol it chose,
// server completes TLS with the agent. Package sandbox/secrettls calls it
// at init; the connections they return have CloseWrite (close_notify).
func SetTLS(client func(c net.Conn, host string, roots *x509.CertPool) (net.Conn, string, error),
	server func(c net.Conn, chain [][]byte, key crypto.Signer) (net.Conn, error)) {
	tlsClient, tlsServer = client, server
}

// ErrNoTLS: the running binary cannot intercept a secret's host.
var ErrNoTLS = errors.New("egress: this binary links no TLS, which a run with secrets needs (baton does, baton-runner does not: a worker starts runs with secrets from baton)")

// TLSReady is ErrNoTLS unless SetTLS was called.
func TLSReady() error {
	if tlsClient == nil || tlsServer == nil {
		return ErrNoTLS
	}
	return nil
}

// closeWriter is a connection whose write side closes alone.
type closeWriter interface {
	net.Conn
	CloseWrite() error
}
