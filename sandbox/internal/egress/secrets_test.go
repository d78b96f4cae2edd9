package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/sandbox/runspec"
)

// Placeholders and values of the tests' secrets.
const (
	keyPH   = "baton-secret-api-key-0123456789abcdef"
	keyVal  = "sk-real-api-key"
	tokPH   = "baton-secret-token-0123456789abcdef"
	tokVal  = "ghp_realtoken"
	gitPH   = "baton-secret-git-0123456789abcdef"
	gitVal  = "git-real-password"
	farPH   = "baton-secret-far-0123456789abcdef"
	farVal  = "far-real-value"
	apiHost = "api.example.com"
	// untouched is allowed, and no secret is for it.
	untouched = "c.example.net"
)

// testSecrets: three secrets for apiHost, one per header kind, and one for
// another host.
func testSecrets() []runspec.Secret {
	return []runspec.Secret{
		{Name: "API_KEY", Placeholder: keyPH, Value: keyVal, Hosts: []string{apiHost}, Header: runspec.HeaderAPIKey},
		{Name: "TOKEN", Placeholder: tokPH, Value: tokVal, Hosts: []string{apiHost}, Header: runspec.HeaderAuthorization},
		{Name: "GIT", Placeholder: gitPH, Value: gitVal, Hosts: []string{apiHost}, Header: runspec.HeaderBasic},
		{Name: "FAR", Placeholder: farPH, Value: farVal, Hosts: []string{"b.example.org"}, Header: runspec.HeaderAPIKey},
	}
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestRewriteHead(t *testing.T) {
	s := &Secrets{list: testSecrets()}
	for _, tc := range []struct {
		name, head string
		want       string // the rewritten head; "" when refused
		swapped    string
		refused    string // the secret the refusal names
	}{
		{name: "x-api-key",
			head: "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nx-api-key: " + keyPH + "\r\nContent-Length: 2\r\n\r\n",
			want: "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nx-api-key: " + keyVal + "\r\nContent-Length: 2\r\n\r\n", swapped: "API_KEY"},
		{name: "names without case, bare LF",
			head: "GET / HTTP/1.1\nX-API-KEY:" + keyPH + "\nAUTHORIZATION:   bearer " + tokPH + "  \n\n",
			want: "GET / HTTP/1.1\r\nX-API-KEY: " + keyVal + "\r\nAUTHORIZATION: bearer " + tokVal + "\r\n\r\n", swapped: "API_KEY,TOKEN"},
		{name: "bearer",
			head: "GET / HTTP/1.1\r\nAuthorization: Bearer " + tokPH + "\r\n\r\n",
			want: "GET / HTTP/1.1\r\nAuthorization: Bearer " + tokVal + "\r\n\r\n", swapped: "TOKEN"},
		{name: "basic user:placeholder",
			head: "GET /r.git/info/refs HTTP/1.1\r\nAuthorization: " + basic("x-access-token", gitPH) + "\r\n\r\n",
			want: "GET /r.git/info/refs HTTP/1.1\r\nAuthorization: " + basic("x-access-token", gitVal) + "\r\n\r\n", swapped: "GIT"},
		{name: "multiple headers in order",
			head: "GET / HTTP/1.1\r\nA: 1\r\nx-api-key: " + keyPH + "\r\nB: 2\r\nx-api-key: " + keyPH + "\r\n\r\n",
			want: "GET / HTTP/1.1\r\nA: 1\r\nx-api-key: " + keyVal + "\r\nB: 2\r\nx-api-key: " + keyVal + "\r\n\r\n", swapped: "API_KEY"},
		{name: "a placeholder outside its header stays",
			head: "GET /?k=" + keyPH + " HTTP/1.1\r\nX-Other: " + keyPH + "\r\nAuthorization: Bearer " + keyPH + "\r\n\r\n",
			want: "GET /?k=" + keyPH + " HTTP/1.1\r\nX-Other: " + keyPH + "\r\nAuthorization: Bearer " + keyPH + "\r\n\r\n"},
		{name: "a bearer placeholder in x-api-key stays",
			head: "GET / HTTP/1.1\r\nx-api-key: " + tokPH + "\r\n\r\n",
			want: "GET / HTTP/1.1\r\nx-api-key: " + tokPH + "\r\n\r\n"},
		{name: "basic with the placeholder as user stays",
			head: "GET / HTTP/1.1\r\nAuthorization: " + basic(gitPH, "") + "\r\n\r\n",
			want: "GET / HTTP/1.1\r\nAuthorization: " + basic(gitPH, "") + "\r\n\r\n"},
		{name: "another host's placeholder in a header",
			head: "GET / HTTP/1.1\r\nx-api-key: " + farPH + "\r\n\r\n", refused: "FAR"},
		{name: "another host's placeholder in the URL",
			head: "GET /collect?k=" + farPH + " HTTP/1.1\r\n\r\n", refused: "FAR"},
		{name: "another host's placeholder inside a value",
			head: "GET / HTTP/1.1\r\nCookie: a=b; c=" + farPH + "x\r\n\r\n", refused: "FAR"},
		{name: "another host's placeholder in a Basic credential",
			head: "GET / HTTP/1.1\r\nAuthorization: " + basic("u", farPH) + "\r\n\r\n", refused: "FAR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, swapped, err := s.rewriteHead([]byte(tc.head), apiHost)
			if tc.refused != "" {
				var se *SecretError
				if !errors.As(err, &se) || se.Name != tc.refused || !errors.Is(err, ErrSecretMisplaced) {
					t.Fatalf("err %v, want a refusal naming %s", err, tc.refused)
				}
				if !strings.Contains(err.Error(), "secret "+tc.refused+" sent to a host not listed for it") || strings.Contains(err.Error(), farVal) {
					t.Errorf("reason %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("head\n%q\nwant\n%q", out, tc.want)
			}
			if got := strings.Join(swapped, ","); got != tc.swapped {
				t.Errorf("swapped %q, want %q", got, tc.swapped)
			}
		})
	}
}

func TestMisplacedPlainHTTP(t *testing.T) {
	s := &Secrets{list: testSecrets()}
	// Plain HTTP: no secret goes, not even to its own host.
	for _, head := range []string{
		"GET http://api.example.com/?k=" + keyPH + " HTTP/1.1\r\n\r\n",
		"GET http://b.example.org/ HTTP/1.1\r\nx-api-key: " + farPH + "\r\n\r\n",
		"GET http://a/ HTTP/1.1\r\nAuthorization: " + basic("u", gitPH) + "\r\n\r\n",
	} {
		err := s.misplaced("api.example.com", PlainHTTP, []byte(head))
		var se *SecretError
		if !errors.As(err, &se) || se.Where != PlainHTTP || !strings.Contains(err.Error(), "over plain HTTP") {
			t.Errorf("%q: %v", head, err)
		}
	}
	if err := s.misplaced("api.example.com", PlainHTTP, []byte("GET http://a/ HTTP/1.1\r\nx: baton-secret-\r\n\r\n")); err != nil {
		t.Errorf("a head without a placeholder: %v", err)
	}
	var none *Secrets
	if err := none.misplaced("a", PlainHTTP, []byte(keyPH)); err != nil || none.intercepts(apiHost) {
		t.Error("a proxy without secrets refused or intercepted")
	}
}

func TestScanWriter(t *testing.T) {
	s := &Secrets{list: testSecrets()}
	var got bytes.Buffer
	sw := s.scanner(&got, apiHost, InterceptedHost)
	// A misplaced placeholder split across writes: refused before any of
	// it went.
	half := len(farPH) / 2
	if _, err := sw.Write([]byte("{\"a\":\"" + farPH[:half])); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write([]byte(farPH[half:] + "\"}")); !errors.Is(err, ErrSecretMisplaced) {
		t.Fatalf("second write: %v", err)
	}
	if strings.Contains(got.String(), farPH[:4]) {
		t.Errorf("passed on %q", got.String())
	}
	// The host's own placeholder passes, whole.
	got.Reset()
	sw = s.scanner(&got, apiHost, InterceptedHost)
	body := "{\"k\":\"" + keyPH + "\"}"
	for _, b := range []byte(body) {
		if _, err := sw.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.flush(); err != nil || got.String() != body {
		t.Errorf("passed on %q, %v", got.String(), err)
	}
}

func TestReadHead(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("\r\nGET / HTTP/1.1\r\nA: "+strings.Repeat("x", 5000)+"\r\n\r\nrest"), 16)
	head, err := readHead(br, 6000)
	if err != nil || !strings.HasPrefix(string(head), "GET / HTTP/1.1\r\n") || !strings.HasSuffix(string(head), "x\r\n\r\n") {
		t.Fatalf("head %q, %v", head, err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "rest" {
		t.Errorf("left %q", rest)
	}
	// A line whose CR ends a full buffer: its LF, read alone, is not the
	// empty line that ends the head (FuzzRewriteHead found it).
	split := "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nx-api-key: " + keyPH + "\r\n\r\n"
	if head, err := readHead(bufio.NewReaderSize(strings.NewReader(split), 16), 6000); err != nil || string(head) != split {
		t.Errorf("split line: head %q, %v", head, err)
	}
	if _, err := readHead(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nA: "+strings.Repeat("x", 100)+"\r\n\r\n")), 64); !errors.Is(err, errHeadTooLarge) {
		t.Errorf("a long head: %v", err)
	}
	if _, err := readHead(bufio.NewReader(strings.NewReader(strings.Repeat("\r\n", 40)+"GET / HTTP/1.1\r\n\r\n")), 64); !errors.Is(err, errHeadTooLarge) {
		t.Errorf("empty lines without end: %v", err)
	}
	if _, err := readHead(bufio.NewReader(strings.NewReader("")), 64); err != io.EOF {
		t.Errorf("no head: %v", err)
	}
	if _, err := readHead(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\n")), 64); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut head: %v", err)
	}
}

// secretFixture is a proxy with the test secrets whose dials land on a
// TLS origin that records what it received; the origin's certificate is
// from its own CA, which the proxy trusts as UpstreamCA.
type secretFixture struct {
	addr     string
	runCA    *x509.CertPool // what the sandbox trusts
	origin   string         // the origin, for direct requests
	upstream *x509.CertPool
	proxy    *Proxy
	mu       sync.Mutex
	seen     []string // each request's head as the origin saw it
	logs     []string
	outcomes []Outcome // as the run's chain gets them
}

func newSecretFixture(t testing.TB, upstreamTrusted bool) *secretFixture {
	t.Helper()
	f := &secretFixture{}
	p, err := NewPolicy(runspec.Network{Allow: []string{apiHost, "b.example.org", untouched}}, WithResolver(func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}), WithLocalAddrs(func() ([]netip.Addr, error) { return nil, nil }))
	if err != nil {
		t.Fatal(err)
	}
	originCA, err := NewCA([]string{apiHost, "b.example.org", untouched})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.origin = l.Addr().String()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var h strings.Builder
			_ = r.Header.Write(&h)
			f.mu.Lock()
			f.seen = append(f.seen, r.Method+" "+r.RequestURI+"\n"+h.String()+"\n"+string(body))
			f.mu.Unlock()
			fmt.Fprintf(w, "ok %s", r.Proto)
		}),
		TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			chain, key, err := originCA.Leaf(h.ServerName)
			if err != nil {
				return nil, err
			}
			return &tls.Certificate{Certificate: chain, PrivateKey: key}, nil
		}},
		// Refused handshakes are the tests' point, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(tls.NewListener(l, srv.TLSConfig))
	t.Cleanup(func() { srv.Close() })
	f.upstream = x509.NewCertPool()
	f.upstream.AppendCertsFromPEM(originCA.CertPEM())

	n := runspec.Network{Allow: []string{apiHost, "b.example.org", untouched}, Secrets: testSecrets()}
	if upstreamTrusted {
		n.UpstreamCA = string(originCA.CertPEM())
	}
	ca, err := NewCA(SecretHosts(n.Secrets))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := NewSecrets(n, ca)
	if err != nil {
		t.Fatal(err)
	}
	f.runCA = x509.NewCertPool()
	f.runCA.AppendCertsFromPEM(ca.CertPEM())
	x := NewProxy(p, func(format string, args ...any) {
		f.mu.Lock()
		f.logs = append(f.logs, fmt.Sprintf(format, args...))
		f.mu.Unlock()
	}, OnDone(func(o Outcome) {
		f.mu.Lock()
		f.outcomes = append(f.outcomes, o)
		f.mu.Unlock()
	}))
	x.SetSecrets(sec)
	f.proxy = x
	x.dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", f.origin)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Serve(ctx, pl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.addr = pl.Addr().String()
	return f
}

// client is the agent's HTTP client: through the proxy, trusting the
// run's CA only, offering HTTP/2 as clients do.
func (f *secretFixture) client() *http.Client {
	pu := &url.URL{Scheme: "http", Host: f.addr}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: f.runCA}, ForceAttemptHTTP2: true,
	}}
}

func (f *secretFixture) lastSeen() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return ""
	}
	return f.seen[len(f.seen)-1]
}

func do(t testing.TB, c *http.Client, method, u string, h map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyInterceptsSecrets(t *testing.T) {
	f := newSecretFixture(t, true)
	c := f.client()
	// Keep-alive: every request on the connection is rewritten.
	for i := range 3 {
		code, body := do(t, c, "POST", "https://api.example.com/v1/messages", map[string]string{"x-api-key": keyPH}, fmt.Sprintf("{\"n\":%d}", i))
		if code != 200 || body != "ok HTTP/1.1" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		seen := f.lastSeen()
		if !strings.Contains(seen, "X-Api-Key: "+keyVal) || strings.Contains(seen, keyPH) || !strings.Contains(seen, fmt.Sprintf("{\"n\":%d}", i)) {
			t.Errorf("request %d: the origin saw %q", i, seen)
		}
	}
	// The host as the agent may spell it.
	code, _ := do(t, f.client(), "GET", "https://API.Example.com./", map[string]string{"X-API-Key": keyPH}, "")
	if seen := f.lastSeen(); code != 200 || !strings.Contains(seen, "X-Api-Key: "+keyVal) {
		t.Errorf("upper case, trailing dot: %d, the origin saw %q", code, seen)
	}
	code, _ = do(t, c, "GET", "https://api.example.com/r.git/info/refs", map[string]string{"Authorization": basic("x-access-token", gitPH)}, "")
	if seen := f.lastSeen(); code != 200 || !strings.Contains(seen, "Authorization: "+basic("x-access-token", gitVal)) {
		t.Errorf("basic: %d, the origin saw %q", code, seen)
	}
	// Another host's placeholder to this host: refused, recorded, never
	// sent; in a header, in the URL, in a body.
	before := len(f.seen)
	for _, tc := range []struct {
		what, u string
		h       map[string]string
		body    string
	}{
		{"header", "https://api.example.com/", map[string]string{"x-api-key": farPH}, ""},
		{"URL", "https://api.example.com/?k=" + farPH, nil, ""},
		{"body", "https://api.example.com/", nil, "{\"k\":\"" + farPH + "\"}"},
	} {
		code, body := do(t, f.client(), "POST", tc.u, tc.h, tc.body)
		if code != 403 || !strings.Contains(body, "secret FAR sent to a host not listed for it") {
			t.Errorf("%s: %d %q", tc.what, code, body)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// The header and URL refusals sent nothing; the body's sent its head
	// and the body up to the placeholder, then cut the request.
	if len(f.seen) > before+1 {
		t.Errorf("the origin received refused requests: %q", f.seen[before:])
	}
	for _, seen := range f.seen {
		if strings.Contains(seen, farPH) {
			t.Errorf("the origin saw the placeholder: %q", seen)
		}
	}
	refusals := 0
	for _, l := range f.logs {
		if strings.Contains(l, "secret FAR sent to a host not listed for it") {
			refusals++
		}
		for _, v := range []string{keyVal, tokVal, gitVal, farVal} {
			if strings.Contains(l, v) {
				t.Errorf("a log line holds a value: %q", l)
			}
		}
	}
	if refusals != 3 {
		t.Errorf("%d refusals logged, want 3: %q", refusals, f.logs)
	}
}

// TestInterceptReports: what intercept returns for a tunnel, which the
// proxy's report of the connection carries: the secrets it put in, and
// why it refused a request.
func TestInterceptReports(t *testing.T) {
	f := newSecretFixture(t, true)
	run := func(headers ...string) Intercepted {
		agent, proxySide := net.Pipe()
		defer agent.Close()
		up, err := net.Dial("tcp", f.origin)
		if err != nil {
			t.Fatal(err)
		}
		defer up.Close()
		done := make(chan Intercepted, 1)
		go func() {
			defer proxySide.Close()
			done <- f.proxy.intercept(proxySide, bufio.NewReader(proxySide), up, apiHost+":443", apiHost)
		}()
		_ = agent.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(agent)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		c := tls.Client(agent, &tls.Config{ServerName: apiHost, RootCAs: f.runCA, NextProtos: []string{"h2", "http/1.1"}})
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("ALPN %q, want http/1.1 only", p)
		}
		cbr := bufio.NewReader(c)
		// Every request on the one connection.
		for _, h := range headers {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n", apiHost, h)
			resp, err := http.ReadResponse(cbr, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.Close()
		select {
		case out := <-done:
			return out
		case <-time.After(10 * time.Second):
			t.Fatal("intercept did not return within 10 s of the agent's close")
			return Intercepted{}
		}
	}
	if out := run("x-api-key: "+keyPH, "X-Other: 1", "Authorization: Bearer "+tokPH, "x-api-key: "+keyPH); out.Secret != "API_KEY,TOKEN" || out.Refused != nil {
		t.Errorf("%+v, want API_KEY,TOKEN swapped and no refusal", out)
	}
	out := run("x-api-key: "+keyPH, "x-api-key: "+farPH)
	if out.Secret != "API_KEY" || !errors.Is(out.Refused, ErrSecretMisplaced) {
		t.Errorf("%+v, want API_KEY swapped, then FAR refused", out)
	}
}

// TestProxyReportsIntercepted: an intercepted tunnel's outcome, which the
// run's chain gets, names the secrets put in and counts the tunnel's bytes;
// one that carried a placeholder where its secret may not go is refused,
// with why.
func TestProxyReportsIntercepted(t *testing.T) {
	f := newSecretFixture(t, true)
	for _, tc := range []struct {
		key  string
		code int
	}{{keyPH, 200}, {farPH, 403}} {
		c := f.client()
		if code, body := do(t, c, "POST", "https://api.example.com/v1/messages", map[string]string{"x-api-key": tc.key}, "{}"); code != tc.code {
			t.Fatalf("x-api-key %s: %d %q, want %d", tc.key, code, body, tc.code)
		}
		// The tunnel's outcome comes when it ends.
		c.CloseIdleConnections()
	}
	var outs []Outcome
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		outs = slices.Clone(f.outcomes)
		f.mu.Unlock()
		if len(outs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes within 10 s of both tunnels' end, want 2: %+v", len(outs), outs)
		}
	}
	slices.SortFunc(outs, func(a, b Outcome) int { return a.Start.Compare(b.Start) })
	ok, refused := outs[0], outs[1]
	if !ok.Allowed || ok.Secret != "API_KEY" || ok.Reason != "" || ok.Host != apiHost || ok.Method != "CONNECT" || ok.BytesOut == 0 || ok.BytesIn == 0 {
		t.Errorf("the intercepted tunnel's outcome %+v, want allowed, API_KEY put in, bytes both ways", ok)
	}
	if refused.Allowed || !strings.Contains(refused.Reason, "secret FAR sent to a host not listed for it") || refused.Secret != "" {
		t.Errorf("the refused tunnel's outcome %+v, want refused for FAR", refused)
	}
}

// TestProxyTunnelsOtherHosts: with secrets, a host no secret lists keeps
// its end-to-end tunnel: the agent sees the host's own certificate, and
// what it sends arrives as sent.
func TestProxyTunnelsOtherHosts(t *testing.T) {
	f := newSecretFixture(t, true)
	c := f.client()
	c.Transport.(*http.Transport).TLSClientConfig.RootCAs = f.upstream // not the run's CA
	code, _ := do(t, c, "GET", "https://"+untouched+"/", map[string]string{"x-api-key": keyPH}, "")
	if seen := f.lastSeen(); code != 200 || !strings.Contains(seen, "X-Api-Key: "+keyPH) {
		t.Errorf("%d, the origin saw %q", code, seen)
	}
	// And the run's CA cannot vouch for it.
	if _, err := f.client().Get("https://" + untouched + "/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("the run's CA vouched for a host no secret lists: %v", err)
	}
}

func TestProxySecretsRefusePlainHTTP(t *testing.T) {
	f := newSecretFixture(t, true)
	code, body := do(t, f.client(), "GET", "http://b.example.org/?k="+keyPH, nil, "")
	if code != 403 || !strings.Contains(body, "secret API_KEY sent over plain HTTP") {
		t.Errorf("%d %q", code, body)
	}
	// The CONNECT target itself.
	_, err := f.client().Get("https://" + keyPH + ".example.org/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("a placeholder as a host name: %v", err)
	}
	if len(f.logs) == 2 && !strings.Contains(f.logs[1], "secret API_KEY sent in a CONNECT target ("+keyPH+".example.org)") {
		t.Errorf("log %q", f.logs[1])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 0 || len(f.logs) != 2 {
		t.Errorf("the origin saw %q; logs %q", f.seen, f.logs)
	}
}

func TestProxyInterceptVerifiesUpstream(t *testing.T) {
	f := newSecretFixture(t, false)
	req, _ := http.NewRequest("GET", "https://api.example.com/", nil)
	req.Header.Set("x-api-key", keyPH)
	_, err := f.client().Do(req)
	if err == nil || !strings.Contains(err.Error(), "Bad Gateway") {
		t.Fatalf("an upstream the host does not trust: %v", err)
	}
	if len(f.seen) != 0 {
		t.Error("the untrusted origin got a request")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], "certificate") {
		t.Errorf("logs %q", f.logs)
	}
}

// FuzzRewriteHead: whatever head the agent sends a secret's host,
// readHead gives at most its bound, ending with an empty line, and the
// rewriting gives a head or a refusal, never a panic; a head it passes
// holds no placeholder of another host's secret, only CRLF line ends, and,
// when the proxy's parser read it, reads again to the same request line
// and header names.
func FuzzRewriteHead(f *testing.F) {
	for _, s := range []string{
		"POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nx-api-key: " + keyPH + "\r\n\r\n",
		"GET / HTTP/1.1\r\nAuthorization: Bearer " + tokPH + "\r\n\r\n",
		"GET / HTTP/1.1\r\nAuthorization: " + basic("u", gitPH) + "\r\n\r\n",
		"GET /?" + farPH + " HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\nx-api-key:" + keyPH + "\n\n",
		"GET / HTTP/1.1\r\nno colon\r\n\r\n",
		"\r\n",
	} {
		f.Add([]byte(s))
	}
	s := &Secrets{list: testSecrets()}
	f.Fuzz(func(t *testing.T, head []byte) {
		// As the relay reads it: a small buffer, so lines span reads.
		if h, err := readHead(bufio.NewReaderSize(bytes.NewReader(head), 16), 512); err == nil {
			if len(h) > 512 || !bytes.HasSuffix(h, []byte("\n\n")) && !bytes.HasSuffix(h, []byte("\n\r\n")) || !bytes.Contains(head, h) {
				t.Fatalf("readHead gave %q of %q", h, head)
			}
		}
		out, _, err := s.rewriteHead(head, apiHost)
		if err != nil {
			return
		}
		if bytes.Contains(out, []byte(farPH)) || bytes.Contains(out, []byte(farVal)) {
			t.Fatalf("passed another host's secret: %q", out)
		}
		for line := range bytes.Lines(out) {
			if !bytes.HasSuffix(line, []byte("\r\n")) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("line %q", line)
			}
		}
		in, err := readRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			return
		}
		again, err := readRequest(bufio.NewReader(bytes.NewReader(out)))
		if err != nil {
			t.Fatalf("the rewritten head %q does not parse: %v", out, err)
		}
		if again.method != in.method || again.target != in.target || len(again.header) != len(in.header) {
			t.Fatalf("rewritten %q to %q", head, out)
		}
	})
}

// BenchmarkInterceptLatency: the latency the proxy's TLS termination adds
// to a request, against a direct TLS request to the same origin measured
// in the same run (the anchor). keep-alive: one connection each, as an
// agent's API client keeps; new-connection: a fresh connection per
// request, so two handshakes through the proxy against one direct.
func BenchmarkInterceptLatency(b *testing.B) {
	f := newSecretFixture(b, true)
	for _, keepAlive := range []bool{true, false} {
		name := "keep-alive"
		if !keepAlive {
			name = "new-connection"
		}
		b.Run(name, func(b *testing.B) {
			via := f.client()
			via.Transport.(*http.Transport).DisableKeepAlives = !keepAlive
			direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				DisableKeepAlives: !keepAlive,
				TLSClientConfig:   &tls.Config{RootCAs: f.upstream, ServerName: apiHost},
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "tcp", f.origin)
				},
			}}
			hdr := map[string]string{"x-api-key": keyPH}
			var viaT, directT []time.Duration
			for b.Loop() {
				start := time.Now()
				if code, _ := do(b, via, "POST", "https://api.example.com/v1/messages", hdr, `{"a":1}`); code != 200 {
					b.Fatalf("through the proxy: %d", code)
				}
				viaT = append(viaT, time.Since(start))
				start = time.Now()
				if code, _ := do(b, direct, "POST", "https://api.example.com/v1/messages", hdr, `{"a":1}`); code != 200 {
					b.Fatalf("direct: %d", code)
				}
				directT = append(directT, time.Since(start))
			}
			pv, pd := median(viaT), median(directT)
			b.ReportMetric(float64(pv.Microseconds())/1000, "ms-p50-intercepted")
			b.ReportMetric(float64(pd.Microseconds())/1000, "ms-p50-direct")
			b.ReportMetric(float64((pv-pd).Microseconds())/1000, "ms-p50-added")
			b.ReportMetric(float64(pv)/float64(pd), "ratio")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestSecretsNeedTLS: a binary that was given no TLS (baton-runner) says
// so for a run with secrets, rather than tunnelling its hosts unswapped.
func TestSecretsNeedTLS(t *testing.T) {
	ca, err := NewCA([]string{apiHost})
	if err != nil {
		t.Fatal(err)
	}
	saved := given
	t.Cleanup(func() { given = saved })
	given.newCA, given.parseCA, given.upstream, given.server = nil, nil, nil, nil
	if _, err := NewSecrets(runspec.Network{Allow: []string{apiHost}, Secrets: testSecrets()}, ca); !errors.Is(err, ErrNoTLS) || TLSReady() == nil {
		t.Fatalf("NewSecrets without TLS: %v, want ErrNoTLS", err)
	}
	if _, err := NewCA([]string{apiHost}); !errors.Is(err, ErrNoTLS) {
		t.Fatalf("NewCA without TLS: %v, want ErrNoTLS", err)
	}
	if _, err := ParseCA([]byte("x")); !errors.Is(err, ErrNoTLS) {
		t.Fatalf("ParseCA without TLS: %v, want ErrNoTLS", err)
	}
}
