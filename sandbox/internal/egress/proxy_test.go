package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyFixture runs a proxy whose dials all land on one local HTTP
// server, recording where the proxy meant to connect.
type proxyFixture struct {
	addr     string
	mu       sync.Mutex
	dialed   []netip.AddrPort
	logs     []string
	outcomes []Outcome
}

func newProxyFixture(t *testing.T) *proxyFixture {
	t.Helper()
	p, _ := testPolicy(t, map[string][]string{"api.example.com": {"93.184.216.34"}, "a.example.org": {"10.0.0.9"}})
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "origin saw %s %s host=%s proxy-auth=%q body=%q", r.Method, r.RequestURI, r.Host, r.Header.Get("Proxy-Authorization"), body)
	})}
	go srv.Serve(origin)
	t.Cleanup(func() { srv.Close() })

	f := &proxyFixture{}
	x := NewProxy(p, func(format string, args ...any) {
		f.mu.Lock()
		f.logs = append(f.logs, fmt.Sprintf(format, args...))
		f.mu.Unlock()
	}, OnDone(func(o Outcome) {
		f.mu.Lock()
		f.outcomes = append(f.outcomes, o)
		f.mu.Unlock()
	}))
	x.dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		f.mu.Lock()
		f.dialed = append(f.dialed, a)
		f.mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, "tcp", origin.Addr().String())
	}
	addr, stop := serveProxy(t, x)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.addr = addr
	return f
}

// serveProxy serves x on a loopback port, its address returned, until
// stop, which returns Serve's error.
func serveProxy(t *testing.T, x *Proxy) (addr string, stop func() error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Serve(ctx, l) }()
	return l.Addr().String(), func() error {
		cancel()
		return <-done
	}
}

// roundTrip sends raw on a new connection and returns the whole reply.
func (f *proxyFixture) roundTrip(t *testing.T, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestProxyConnect(t *testing.T) {
	f := newProxyFixture(t)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// The tunnelled request rides in the same write as the CONNECT head.
	fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\nGET /x HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	inner, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(inner.Body)
	if !strings.Contains(string(body), "origin saw GET /x host=api.example.com") {
		t.Errorf("tunnelled reply %q", body)
	}
	if len(f.dialed) != 1 || f.dialed[0] != netip.MustParseAddrPort("93.184.216.34:443") {
		t.Errorf("dialed %v, want the checked address", f.dialed)
	}
}

func TestProxyForwardsPlainHTTP(t *testing.T) {
	f := newProxyFixture(t)
	got := f.roundTrip(t, "GET http://test.internal:8080/path?q=1 HTTP/1.1\r\nHost: test.internal:8080\r\nProxy-Authorization: secret\r\nProxy-Connection: keep-alive\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "origin saw GET /path?q=1 host=test.internal:8080 proxy-auth=\"\"") {
		t.Errorf("reply %q", got)
	}
	if len(f.dialed) != 1 || f.dialed[0] != netip.MustParseAddrPort("10.213.7.2:8080") {
		t.Errorf("dialed %v", f.dialed)
	}
	// A body goes as its Content-Length frames it, and nothing after it:
	// a second request in the same write never reaches the origin.
	got = f.roundTrip(t, "POST http://test.internal:8080/p HTTP/1.1\r\nHost: elsewhere.example\r\nContent-Length: 5\r\n\r\nhelloGET http://test.internal:8080/2 HTTP/1.1\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, `origin saw POST /p host=test.internal:8080 proxy-auth="" body="hello"`) || strings.Contains(got, "/2") {
		t.Errorf("reply %q", got)
	}
	got = f.roundTrip(t, "POST http://test.internal:8080/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET http://test.internal:8080/2 HTTP/1.1\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, `origin saw POST /c host=test.internal:8080 proxy-auth="" body="hello world"`) || strings.Contains(got, "/2") {
		t.Errorf("chunked: reply %q", got)
	}
}

// awaitOutcomes waits for the proxy to report n outcomes (a connection's
// comes once both its ends closed) and returns them.
func (f *proxyFixture) awaitOutcomes(t *testing.T, n int) []Outcome {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		got := slices.Clone(f.outcomes)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %d egress outcomes, have %d: %+v", n, len(got), got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each request the proxy decides is reported once, when it ends: what it
// asked for, the policy's answer and why, and the bytes each way (the
// agent's, not the proxy's own replies). A head that names no target is
// not reported.
func TestProxyOutcomes(t *testing.T) {
	f := newProxyFixture(t)
	before := time.Now()
	// A tunnel carrying one request.
	tunnelled := "GET /x HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n"
	got := f.roundTrip(t, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n"+tunnelled)
	const established = "HTTP/1.1 200 Connection established\r\n\r\n"
	if !strings.HasPrefix(got, established) {
		t.Fatalf("CONNECT reply %q", got)
	}
	tunnel, tunnelIn := f.awaitOutcomes(t, 1)[0], len(got)-len(established)
	// A forwarded request with a body.
	got = f.roundTrip(t, "POST http://test.internal:8080/p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
	forwarded := f.awaitOutcomes(t, 2)[1]
	// Refusals: by name, by address, and a malformed target (none).
	f.roundTrip(t, "CONNECT evil.example.net:443 HTTP/1.1\r\n\r\n")
	f.roundTrip(t, "GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n")
	f.roundTrip(t, "CONNECT api.example.com HTTP/1.1\r\n\r\n")
	all := f.awaitOutcomes(t, 4)

	if tunnel.Host != "api.example.com" || tunnel.Port != 443 || tunnel.Method != "CONNECT" || !tunnel.Allowed || tunnel.Reason != "" ||
		tunnel.BytesOut != int64(len(tunnelled)) || tunnel.BytesIn != int64(tunnelIn) {
		t.Errorf("tunnel outcome %+v", tunnel)
	}
	if tunnel.Start.Before(before) || tunnel.Duration <= 0 || tunnel.Secret != "" {
		t.Errorf("tunnel outcome %+v: start before the test's %v, or no duration, or a secret", tunnel, before)
	}
	wantHead := "POST /p HTTP/1.1\r\nHost: test.internal:8080\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
	if forwarded.Host != "test.internal" || forwarded.Port != 8080 || forwarded.Method != "POST" || !forwarded.Allowed ||
		forwarded.BytesOut != int64(len(wantHead)+5) || forwarded.BytesIn != int64(len(got)) {
		t.Errorf("forwarded outcome %+v; reply of %d bytes, head sent %d bytes + 5", forwarded, len(got), len(wantHead))
	}
	refused := all[2:]
	if len(all) != 4 {
		t.Fatalf("%d outcomes, want 4 (a malformed target has none): %+v", len(all), all)
	}
	for i, want := range []struct{ host, method, why string }{
		{"evil.example.net", "CONNECT", "not on the allowlist"},
		{"169.254.169.254", "GET", "only inside a CIDR entry"},
	} {
		o := refused[i]
		if o.Host != want.host || o.Method != want.method || o.Allowed || !strings.Contains(o.Reason, want.why) || o.BytesOut != 0 || o.BytesIn != 0 {
			t.Errorf("refusal %d: %+v, want %s %s refused mentioning %q", i, o, want.method, want.host, want.why)
		}
	}
}

func TestChunkSize(t *testing.T) {
	for line, want := range map[string]int64{"0\r\n": 0, "1a\r\n": 26, "FF;name=v\r\n": 255, "10 ;x\r\n": 16} {
		if n, ok := chunkSize([]byte(line)); !ok || n != want {
			t.Errorf("chunkSize(%q) = %d, %v; want %d", line, n, ok, want)
		}
	}
	for _, line := range []string{"\r\n", "x\r\n", "-1\r\n", "5\n", "5\r\r\n", "1000000000000000\r\n", " 5\r\n"} {
		if n, ok := chunkSize([]byte(line)); ok {
			t.Errorf("chunkSize(%q) = %d, accepted", line, n)
		}
	}
}

func TestProxyRefuses(t *testing.T) {
	f := newProxyFixture(t)
	for _, tc := range []struct {
		name, raw string
		code      int
		why       string
	}{
		{"name off the list", "CONNECT evil.example.net:443 HTTP/1.1\r\n\r\n", 403, "not on the allowlist"},
		{"loopback literal", "CONNECT 127.0.0.1:4222 HTTP/1.1\r\n\r\n", 403, "only inside a CIDR entry"},
		{"metadata literal", "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n", 403, "only inside a CIDR entry"},
		{"metadata plain", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", 403, "only inside a CIDR entry"},
		{"host address in a listed CIDR", "CONNECT 10.213.7.1:22 HTTP/1.1\r\n\r\n", 403, "address of the host"},
		{"public literal", "CONNECT 93.184.216.34:443 HTTP/1.1\r\n\r\n", 403, "only inside a CIDR entry"},
		{"allowed name resolving private", "CONNECT a.example.org:443 HTTP/1.1\r\n\r\n", 403, "private address"},
		{"no port", "CONNECT api.example.com HTTP/1.1\r\n\r\n", 400, "not host:port"},
		{"port zero", "CONNECT api.example.com:0 HTTP/1.1\r\n\r\n", 400, "not host:port"},
		{"origin form", "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 400, "absolute http:// URL"},
		{"https URL without CONNECT", "GET https://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 400, "absolute http:// URL"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "malformed"},
		{"gzip body", "POST http://test.internal:8080/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "Transfer-Encoding"},
		{"length and chunked", "POST http://test.internal:8080/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400, "both"},
		{"two lengths", "POST http://test.internal:8080/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "Content-Length"},
		{"no version", "GET http://test.internal:8080/\r\n\r\n", 400, "malformed"},
		{"bad header", "GET http://test.internal:8080/ HTTP/1.1\r\nX Y: 1\r\n\r\n", 400, "malformed"},
		{"huge head", "GET http://api.example.com/ HTTP/1.1\r\nX: " + strings.Repeat("a", maxHead) + "\r\n\r\n", 431, "too large"},
	} {
		got := f.roundTrip(t, tc.raw)
		if !strings.HasPrefix(got, fmt.Sprintf("HTTP/1.1 %d ", tc.code)) || !strings.Contains(got, tc.why) {
			t.Errorf("%s: reply %q, want %d mentioning %q", tc.name, got, tc.code, tc.why)
		}
	}
	if len(f.dialed) != 0 {
		t.Errorf("refused requests dialed %v", f.dialed)
	}
	if len(f.logs) == 0 {
		t.Error("refusals were not logged")
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"a.com:443": "a.com 443", "[::1]:80": "::1 80", "a.com": "a.com 80", "[fd00::1]": "fd00::1 80",
	} {
		h, p, err := hostPort(in, "80")
		if got := fmt.Sprintf("%s %d", h, p); err != nil || got != want {
			t.Errorf("hostPort(%q) = %s, %v, want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", ":443", "a.com:", "a.com:x", "a.com:65536", "::1", "a.com:-1"} {
		if h, p, err := hostPort(in, "80"); err == nil {
			t.Errorf("hostPort(%q) = %s %d", in, h, p)
		}
	}
	if _, _, err := hostPort("a.com", ""); err == nil {
		t.Error("a CONNECT target without a port was accepted")
	}
}

// FuzzReadRequest: the proxy's own request-head parser takes what the
// agent sends. Whatever it is, it gives a head or an error, never a
// panic, and a head it accepts has a token method, a target without
// blanks and token header names (what the forwarder relies on).
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
		"POST http://x/ HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
		"GET http://x/ HTTP/1.1\r\nContent-Length : 1\r\n\r\n",
		"GET  / HTTP/1.1\r\n\r\n",
		"\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := readRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if !isToken(req.method) || req.target == "" || strings.ContainsAny(req.target, " \t") {
			t.Fatalf("accepted request line: method %q target %q", req.method, req.target)
		}
		for k := range req.header {
			if !isToken(k) {
				t.Fatalf("accepted header name %q", k)
			}
		}
	})
}

// FuzzChunkSize: a chunk-size line gives a size or a refusal, never a
// negative size.
func FuzzChunkSize(f *testing.F) {
	for _, s := range []string{"1a\r\n", "0\r\n", "ff;ext=1\r\n", "\r\n", "-1\r\n", "fffffffffffffffff\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if n, ok := chunkSize(line); ok && n < 0 {
			t.Fatalf("chunkSize(%q) = %d", line, n)
		}
	})
}

// TestProxyStopEndsTunnels: when the proxy stops (the sandbox is gone),
// a tunnel to a host that never closes ends too, and is reported: the
// runner waits for it before it ends the journal.
func TestProxyStopEndsTunnels(t *testing.T) {
	p, _ := testPolicy(t, map[string][]string{"api.example.com": {"93.184.216.34"}})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	got := make(chan string, 1)
	go func() {
		c, err := silent.Accept()
		if err != nil {
			return
		}
		defer c.Close() // held open, never answered
		b := make([]byte, 5)
		_, _ = io.ReadFull(c, b)
		got <- string(b)
		<-t.Context().Done()
	}()
	reported := make(chan Outcome, 1)
	x := NewProxy(p, nil, OnDone(func(o Outcome) { reported <- o }))
	x.dial = func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", silent.Addr().String())
	}
	addr, stop := serveProxy(t, x)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\nhello")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("the host got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waited 5s for the tunnelled bytes to reach the host")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waited 5s for the proxy to stop with a tunnel to a silent host open")
	}
	select {
	case o := <-reported:
		if o.Host != "api.example.com" || !o.Allowed || o.BytesOut != 5 {
			t.Fatalf("outcome %+v", o)
		}
	default:
		t.Fatal("the stopped tunnel was not reported before Serve returned")
	}
}

// A host the policy allows but that does not answer: the outcome is
// allowed, and says why it failed.
func TestProxyOutcomeDialFailed(t *testing.T) {
	p, _ := testPolicy(t, map[string][]string{"api.example.com": {"93.184.216.34"}})
	reported := make(chan Outcome, 1)
	x := NewProxy(p, nil, OnDone(func(o Outcome) { reported <- o }))
	x.dial = func(context.Context, netip.AddrPort) (net.Conn, error) { return nil, errors.New("connection refused") }
	addr, stop := serveProxy(t, x)
	defer stop()
	f := &proxyFixture{addr: addr}
	if got := f.roundTrip(t, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 502 ") {
		t.Fatalf("reply %q, want 502", got)
	}
	select {
	case o := <-reported:
		if o.Host != "api.example.com" || !o.Allowed || !strings.Contains(o.Reason, "connection refused") || o.BytesOut != 0 {
			t.Fatalf("outcome %+v", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waited 5s for the failed tunnel's outcome")
	}
}
