// Package tlsterm holds the crypto of a tunnel the egress proxy
// intercepts for a run's secrets: the two TLS handshakes, to the real
// host, verified, and to the agent, as that host, and the run's CA that
// signs the agent's side. It is all of baton's sandbox that links
// crypto/tls and crypto/x509, in signatures of the standard library only,
// so the egress proxy reaches it through functions it is given (package
// sandbox/secrettls) and baton-runner, which links none of it, keeps every
// run's runner processes free of their package init: each of the six Go
// starts of a cold run paid it (docs/benchmarks-log.md, "A runner without
// x509").
package tlsterm

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// protos is what both sides are offered: the proxy rewrites HTTP/1.1
// request heads, so the agent never gets HTTP/2.
var protos = []string{"http/1.1"}

// Upstream is the client side of a run's interceptions: it completes TLS
// to host over c, verifying its certificate against the host's roots and
// upstreamCA (PEM certificates, or empty), and says which protocol the
// host chose ("" for none).
func Upstream(upstreamCA string) (func(c net.Conn, host string) (net.Conn, string, error), error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("egress: the host's CA certificates: %w", err)
	}
	if upstreamCA != "" && !roots.AppendCertsFromPEM([]byte(upstreamCA)) {
		return nil, errors.New("egress: upstreamCA holds no PEM certificate")
	}
	return func(c net.Conn, host string) (net.Conn, string, error) {
		up := tls.Client(c, &tls.Config{ServerName: host, RootCAs: roots, NextProtos: protos, MinVersion: tls.VersionTLS12})
		if err := up.Handshake(); err != nil {
			return nil, "", err
		}
		return up, up.ConnectionState().NegotiatedProtocol, nil
	}, nil
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
