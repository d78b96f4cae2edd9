// Package tlsterm holds the two TLS handshakes of a tunnel the egress
// proxy intercepts for a run's secrets: to the real host, verified, and
// to the agent, as that host. It is all of baton's sandbox that links
// crypto/tls, in signatures of the standard library only, so the egress
// proxy reaches it through a function it is given (package
// sandbox/secrettls) and baton-runner, which links none of it, keeps
// every run's two runner processes free of crypto/tls's package init.
package tlsterm

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
)

// protos is what both sides are offered: the proxy rewrites HTTP/1.1
// request heads, so the agent never gets HTTP/2.
var protos = []string{"http/1.1"}

// Client completes TLS to host over c, verifying its certificate against
// roots, and says which protocol the host chose ("" for none).
func Client(c net.Conn, host string, roots *x509.CertPool) (net.Conn, string, error) {
	up := tls.Client(c, &tls.Config{ServerName: host, RootCAs: roots, NextProtos: protos, MinVersion: tls.VersionTLS12})
	if err := up.Handshake(); err != nil {
		return nil, "", err
	}
	return up, up.ConnectionState().NegotiatedProtocol, nil
}

// Server completes TLS with the agent over c, showing chain (the leaf
// first) whose key is key.
func Server(c net.Conn, chain [][]byte, key crypto.Signer) (net.Conn, error) {
	ag := tls.Server(c, &tls.Config{
		Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}}, NextProtos: protos, MinVersion: tls.VersionTLS12,
	})
	if err := ag.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS with the agent: %w", err)
	}
	return ag, nil
}
