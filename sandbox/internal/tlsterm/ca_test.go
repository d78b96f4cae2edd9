package tlsterm

import (
	"bytes"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
)

func TestCA(t *testing.T) {
	ca, err := NewCA([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCA(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CertPEM(), ca.CertPEM()) || strings.Contains(string(ca.CertPEM()), "PRIVATE") {
		t.Error("the certificate did not survive its hand-over, or holds the key")
	}
	if _, err := ParseCA(ca.CertPEM()); !errors.Is(err, ErrBadCA) {
		t.Errorf("a CA without its key: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	for host, ok := range map[string]bool{"api.example.com": true, "evil.example.net": false} {
		chain, _, err := again.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(chain[0])
		_, err = c.Verify(x509.VerifyOptions{DNSName: host, Roots: roots})
		if (err == nil) != ok {
			t.Errorf("%s: verify: %v, want ok=%v (the name constraints)", host, err, ok)
		}
	}
}
