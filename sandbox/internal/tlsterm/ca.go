package tlsterm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// caLife is how long a run's CA and its certificates are valid: longer
// than any run, and useless after it, as its key dies with runner-outer.
const caLife = 400 * 24 * time.Hour

// CA is a run's own certificate authority: the sandbox trusts its
// certificate, runner-outer alone holds its key, and the proxy signs with
// it a certificate for each secret's host it terminates TLS for. Its name
// constraints permit those hosts only, so even its key could not vouch
// for any other name.
type CA struct {
	cert    *x509.Certificate
	certDER []byte
	key     *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*leafCert
}

// leafCert is a host's certificate chain (the leaf, then the CA) and
// the leaf's key.
type leafCert struct {
	chain [][]byte
	key   *ecdsa.PrivateKey
}

// NewCA makes a CA for hosts (lower-case names).
func NewCA(hosts []string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "baton run egress CA"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caLife),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         hosts,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return newCA(der, key)
}

func newCA(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return &CA{cert: cert, certDER: der, key: key, leaves: map[string]*leafCert{}}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// CertPEM is the CA's certificate, for the sandbox's trust.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.certDER})
}

// MarshalPEM is the certificate and the key, for runner-outer's own
// hand-over across its exec; nothing else may see it.
func (ca *CA) MarshalPEM() ([]byte, error) {
	k, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	return append(ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})...), nil
}

// ErrBadCA: a hand-over's CA does not parse.
var ErrBadCA = errors.New("egress CA: want a certificate and an EC private key in PEM")

// ParseCA reads what MarshalPEM wrote.
func ParseCA(b []byte) (*CA, error) {
	var der []byte
	var key *ecdsa.PrivateKey
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			der = blk.Bytes
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadCA, err)
			}
			key = k
		}
	}
	if der == nil || key == nil {
		return nil, ErrBadCA
	}
	return newCA(der, key)
}

// Leaf is the certificate chain (the leaf, then the CA) the proxy shows
// the agent for host, and the leaf's key, made once.
func (ca *CA) Leaf(host string) ([][]byte, crypto.Signer, error) {
	c, err := ca.leaf(host)
	if err != nil {
		return nil, nil, err
	}
	return c.chain, c.key, nil
}

func (ca *CA) leaf(host string) (*leafCert, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    ca.cert.NotBefore,
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate for %s: %w", host, err)
	}
	c := &leafCert{chain: [][]byte{der, ca.certDER}, key: key}
	ca.leaves[host] = c
	return c, nil
}
