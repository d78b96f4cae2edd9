package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the proxy.
const (
	maxHead        = 64 << 10 // request line and headers
	headTimeout    = 30 * time.Second
	dialTimeout    = 10 * time.Second
	maxProxyConns  = 256
	proxyUserAgent = "baton egress proxy"
)

// Logf receives one line per refusal or failure, for diagnostics.
type Logf func(format string, args ...any)

// Proxy is an HTTP proxy enforcing a Policy: CONNECT host:port tunnels,
// and absolute-form requests (GET http://host/path) forwarded one per
// connection. It reads request heads itself, without net/http: it runs in
// runner-outer, which lives as long as its run, and net/http costs every
// runner process memory; so would crypto/tls, which intercepting a
// secret's host needs: it is given (SetTLS) by the baton binary alone.
type Proxy struct {
	policy  *Policy
	logf    Logf
	done    func(Outcome)
	dial    func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	slots   chan struct{}
	secrets *Secrets
}

// Outcome is what became of one request the proxy decided, once: a
// tunnel or a forwarded request at its end, or a refusal.
type Outcome struct {
	Start  time.Time // when its request head was read
	Host   string    // as the request named it
	Port   uint16
	Method string // CONNECT, or the forwarded request's
	// Allowed: the policy let it through. Reason says why it was
	// refused, or why an allowed one failed (the host did not answer).
	Allowed bool
	Reason  string
	// Secret names the secrets swapped into an intercepted tunnel's
	// requests, comma-separated; never a value.
	Secret string
	// BytesOut went from the agent to the host (a forwarded request's
	// head as sent, and its body; a tunnel's bytes), BytesIn back; the
	// proxy's own replies are not counted.
	BytesOut, BytesIn int64
	Duration          time.Duration
}

// ProxyOption configures NewProxy.
type ProxyOption func(*Proxy)

// OnDone has the proxy call f with each request's Outcome when its
// connection ends or is refused, from the connection's goroutine. A
// request whose target could not even be read (a malformed head) has
// none: it names no host.
func OnDone(f func(Outcome)) ProxyOption { return func(x *Proxy) { x.done = f } }

// NewProxy is a proxy for p. logf may be nil.
func NewProxy(p *Policy, logf Logf, opts ...ProxyOption) *Proxy {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := &net.Dialer{Timeout: dialTimeout}
	x := &Proxy{
		policy: p, logf: logf, done: func(Outcome) {},
		dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a.String())
		},
		slots: make(chan struct{}, maxProxyConns),
	}
	for _, o := range opts {
		o(x)
	}
	return x
}

// report hands out to OnDone's function, its duration measured now.
func (x *Proxy) report(out *Outcome) {
	out.Duration = time.Since(out.Start)
	x.done(*out)
}

// opened records in out how x.open went: code is statusForbidden for a
// refusal by the policy.
func (out *Outcome) opened(code int, err error) {
	out.Allowed = err == nil || code != statusForbidden
	if err != nil {
		out.Reason = err.Error()
	}
}

// refused records in out a refusal of the proxy's own (a placeholder
// where its secret may not go).
func (out *Outcome) refused(err error) {
	out.Allowed, out.Reason = false, err.Error()
}

// SetSecrets makes the proxy add s's secrets to requests to their hosts,
// terminating TLS to those, and refuse their placeholders elsewhere; call
// it before Serve.
func (x *Proxy) SetSecrets(s *Secrets) { x.secrets = s }

// Serve accepts connections on l until ctx ends or l fails; it closes l.
func (x *Proxy) Serve(ctx context.Context, l net.Listener) error {
	refuse := func(c net.Conn) {
		x.logf("proxy: refused a connection: %d connections open", maxProxyConns)
		reply(c, statusUnavailable, "too many connections")
	}
	return serveConns(ctx, l, x.slots, refuse, func(c net.Conn) { x.handle(ctx, c) })
}

// handle serves one client connection; serveConns closes it.
func (x *Proxy) handle(ctx context.Context, c net.Conn) {
	lr := &io.LimitedReader{R: c, N: maxHead}
	br := bufio.NewReader(lr)
	_ = c.SetReadDeadline(time.Now().Add(headTimeout))
	req, err := readRequest(br)
	if err != nil {
		if lr.N <= 0 {
			reply(c, statusHeadTooLarge, "request head too large")
		} else if !errors.Is(err, io.EOF) {
			reply(c, statusBadRequest, "malformed request")
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	lr.N = math.MaxInt64 // the body, if any, is not the head
	start := time.Now()
	if req.method == "CONNECT" {
		x.connect(ctx, c, br, req, start)
		return
	}
	x.forward(ctx, c, br, req, start)
}

// Status codes the proxy replies with.
const (
	statusOK             = 200
	statusBadRequest     = 400
	statusForbidden      = 403
	statusHeadTooLarge   = 431
	statusNotImplemented = 501
	statusBadGateway     = 502
	statusUnavailable    = 503
)

var statusText = map[int]string{
	statusOK: "OK", statusBadRequest: "Bad Request", statusForbidden: "Forbidden",
	statusHeadTooLarge: "Request Header Fields Too Large", statusNotImplemented: "Not Implemented",
	statusBadGateway: "Bad Gateway", statusUnavailable: "Service Unavailable",
}

// request is a request's head: its line and its header, whose names and
// values textproto has checked.
type request struct {
	method, target string
	header         textproto.MIMEHeader
}

var errMalformed = errors.New("malformed request line")

// readRequest reads an HTTP/1.x request head.
func readRequest(br *bufio.Reader) (*request, error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !isToken(method) || target == "" || strings.ContainsAny(target, " \t") ||
		proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return nil, errMalformed
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	// textproto keeps a name with a space before its colon, unchanged:
	// refused, as "Content-Length :" would frame the body differently
	// here and upstream.
	for k := range h {
		if !isToken(k) {
			return nil, errMalformed
		}
	}
	return &request{method: method, target: target, header: h}, nil
}

// isToken: an HTTP method and a field name are tokens (RFC 9110 section
// 5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// hostPort splits a CONNECT target or URL host, defaulting the port.
func hostPort(hp, defPort string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		if defPort == "" || strings.Contains(hp, ":") && !strings.HasSuffix(hp, "]") {
			return "", 0, fmt.Errorf("target %q is not host:port", hp)
		}
		host, port = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), defPort
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || host == "" {
		return "", 0, fmt.Errorf("target %q is not host:port", hp)
	}
	return host, uint16(n), nil
}

// open checks host against the policy and dials an allowed address.
func (x *Proxy) open(ctx context.Context, host string, port uint16) (net.Conn, int, error) {
	addrs, err := x.policy.Targets(ctx, host)
	if err != nil {
		return nil, statusForbidden, err
	}
	var last error
	for _, a := range addrs {
		c, err := x.dial(ctx, netip.AddrPortFrom(a, port))
		if err == nil {
			return c, 0, nil
		}
		last = err
	}
	return nil, statusBadGateway, fmt.Errorf("connect to %s port %d: %w", host, port, last)
}

func (x *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *request, start time.Time) {
	host, port, err := hostPort(req.target, "")
	if err != nil {
		reply(c, statusBadRequest, err.Error())
		return
	}
	out := Outcome{Start: start, Host: host, Port: port, Method: req.method}
	defer x.report(&out)
	// A placeholder is never a host name.
	if err := x.secrets.misplaced(host, ConnectTarget, []byte(req.target)); err != nil {
		out.refused(err)
		x.refuse(c, "CONNECT "+req.target, err)
		return
	}
	t, code, err := x.open(ctx, host, port)
	out.opened(code, err)
	if err != nil {
		x.logf("proxy: CONNECT %s: %v", req.target, err)
		reply(c, code, err.Error())
		return
	}
	defer t.Close()
	// The end of ctx closes c (serveConns); t too, or a read from a host
	// that never closes would keep the connection, and its outcome.
	defer context.AfterFunc(ctx, func() { t.Close() })()
	if x.secrets.intercepts(host) {
		// The name as a certificate and SNI spell it.
		ct := &countConn{Conn: t}
		in := x.intercept(c, br, ct, req.target, strings.ToLower(strings.TrimSuffix(host, ".")))
		out.Secret, out.BytesOut, out.BytesIn = in.Secret, ct.out.Load(), ct.in.Load()
		switch {
		case errors.Is(in.Refused, ErrSecretMisplaced):
			out.refused(in.Refused)
		case in.Refused != nil:
			out.Reason = in.Refused.Error()
		}
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Bytes the client sent after the head (a TLS hello) go first.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		w, err := t.Write(b)
		out.BytesOut += int64(w)
		if err != nil {
			return
		}
	}
	sent, got := pipe(c, t)
	out.BytesOut += sent
	out.BytesIn = got
}

// hopHeaders are the proxy's own, never forwarded; Host is written from
// the URL, as the request's target names it.
var hopHeaders = []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade", "Host"}

func (x *Proxy) forward(ctx context.Context, c net.Conn, br *bufio.Reader, req *request, start time.Time) {
	u, err := url.ParseRequestURI(req.target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		reply(c, statusBadRequest, "want CONNECT host:port or an absolute http:// URL")
		return
	}
	// The body goes as the request frames it, checked, and nothing after
	// it: the upstream connection carries this one request.
	chunked, size, code, msg := framing(req.header)
	if code != 0 {
		reply(c, code, msg)
		return
	}
	host, port, err := hostPort(u.Host, "80")
	if err != nil {
		reply(c, statusBadRequest, err.Error())
		return
	}
	out := Outcome{Start: start, Host: host, Port: port, Method: req.method}
	defer x.report(&out)
	ut, code, err := x.open(ctx, host, port)
	out.opened(code, err)
	if err != nil {
		x.logf("proxy: %s %s: %v", req.method, u.Redacted(), err)
		reply(c, code, err.Error())
		return
	}
	defer ut.Close()
	defer context.AfterFunc(ctx, func() { ut.Close() })() // as in connect
	t := &counter{Writer: ut}
	defer func() { out.BytesOut = t.n }() // before report, deferred earlier
	for _, h := range hopHeaders {
		delete(req.header, h)
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.method, u.RequestURI(), u.Host)
	for _, k := range slices.Sorted(maps.Keys(req.header)) {
		for _, v := range req.header[k] {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("Connection: close\r\n\r\n")
	if err := x.secrets.misplaced(host, PlainHTTP, []byte(head.String())); err != nil {
		out.refused(err)
		x.refuse(c, req.method+" "+u.Redacted(), err)
		return
	}
	if _, err := io.WriteString(t, head.String()); err != nil {
		return
	}
	if err := x.copyBody(t, br, host, PlainHTTP, chunked, size); err != nil {
		if errors.Is(err, ErrSecretMisplaced) {
			out.refused(err)
			x.refuse(c, req.method+" "+u.Redacted(), err)
		}
		return
	}
	out.BytesIn, _ = io.Copy(c, ut)
}

// counter counts what is written through it.
type counter struct {
	io.Writer
	n int64
}

func (w *counter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.n += int64(n)
	return n, err
}

// countConn counts the bytes read from and written to a connection, from
// any goroutine (an intercepted tunnel's two directions).
type countConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// framing is how a request's header frames its body: chunked, or size
// bytes; code is not 0 for a header the proxy refuses, msg says why.
func framing(h textproto.MIMEHeader) (chunked bool, size int64, code int, msg string) {
	te, cl := h["Transfer-Encoding"], h["Content-Length"]
	switch {
	case len(te) > 0 && len(cl) > 0:
		return false, 0, statusBadRequest, "both Transfer-Encoding and Content-Length"
	case len(te) > 0:
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return false, 0, statusNotImplemented, "a Transfer-Encoding other than chunked"
		}
		return true, 0, 0, ""
	case len(cl) > 0:
		size, err := strconv.ParseInt(cl[0], 10, 64)
		if err != nil || size < 0 || slices.ContainsFunc(cl, func(v string) bool { return v != cl[0] }) {
			return false, 0, statusBadRequest, "bad Content-Length"
		}
		return false, size, 0, ""
	}
	return false, 0, 0, ""
}

// copyBody copies a request's body, framed as framing said, from br to
// w; with secrets, through their tripwire (scanWriter) for host.
func (x *Proxy) copyBody(w io.Writer, br *bufio.Reader, host string, where Where, chunked bool, size int64) error {
	var sw *scanWriter
	if x.secrets != nil {
		sw = x.secrets.scanner(w, host, where)
		w = sw
	}
	var err error
	if chunked {
		err = copyChunked(w, br)
	} else {
		_, err = io.CopyN(w, br, size)
	}
	if err == nil && sw != nil {
		err = sw.flush()
	}
	return err
}

// refuse answers a request the proxy will not pass on, and records why.
func (x *Proxy) refuse(c net.Conn, what string, err error) {
	x.logf("proxy: %s: %v", what, err)
	reply(c, statusForbidden, err.Error())
}

// copyChunked copies a chunked body from br to w as it came, up to and
// with its last chunk, checking each chunk's framing; a trailer section
// is refused.
func copyChunked(w io.Writer, br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n') // bounded by br's buffer
		if err != nil {
			return err
		}
		size, ok := chunkSize(line)
		if !ok {
			return errMalformed
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		if _, err := io.CopyN(w, br, size); err != nil {
			return err
		}
		end, err := br.ReadSlice('\n')
		if err != nil || string(end) != "\r\n" {
			return errMalformed
		}
		if _, err := w.Write(end); err != nil {
			return err
		}
		if size == 0 {
			return nil
		}
	}
}

// chunkSize parses a chunk-size line, "1a\r\n" or "1a;ext=v\r\n".
func chunkSize(line []byte) (int64, bool) {
	l, ok := strings.CutSuffix(string(line), "\r\n")
	if !ok || strings.ContainsAny(l, "\r\n") {
		return 0, false
	}
	hex, _, _ := strings.Cut(l, ";")
	hex = strings.TrimRight(hex, " \t")
	if hex == "" || len(hex) > 15 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 63)
	return int64(n), err == nil
}

// pipe copies both ways until both directions are done, passing on a
// half-close, and says how many bytes went from a to b and from b to a.
func pipe(a, b net.Conn) (ab, ba int64) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn, n *int64) {
		*n, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { half(a, b, &ba) })
	wg.Go(func() { half(b, a, &ab) })
	wg.Wait()
	return ab, ba
}

// reply writes a short response the agent can read.
func reply(c net.Conn, code int, msg string) {
	body := proxyUserAgent + ": " + msg + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, statusText[code], len(body), body)
}
