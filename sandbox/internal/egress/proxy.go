package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
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
// connection.
type Proxy struct {
	policy *Policy
	logf   Logf
	dial   func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	slots  chan struct{}
}

// NewProxy is a proxy for p. logf may be nil.
func NewProxy(p *Policy, logf Logf) *Proxy {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := &net.Dialer{Timeout: dialTimeout}
	return &Proxy{
		policy: p, logf: logf,
		dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a.String())
		},
		slots: make(chan struct{}, maxProxyConns),
	}
}

// Serve accepts connections on l until ctx ends or l fails; it closes l.
func (x *Proxy) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		select {
		case x.slots <- struct{}{}:
		default:
			x.logf("proxy: refused a connection: %d connections open", maxProxyConns)
			reply(c, http.StatusServiceUnavailable, "too many connections")
			c.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-x.slots }()
			x.handle(ctx, c)
		})
	}
}

// handle serves one client connection.
func (x *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	lr := &io.LimitedReader{R: c, N: maxHead}
	br := bufio.NewReader(lr)
	_ = c.SetReadDeadline(time.Now().Add(headTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		if lr.N <= 0 {
			reply(c, http.StatusRequestHeaderFieldsTooLarge, "request head too large")
		} else if !errors.Is(err, io.EOF) {
			reply(c, http.StatusBadRequest, "malformed request")
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	lr.N = math.MaxInt64 // the body, if any, is not the head
	if req.Method == http.MethodConnect {
		x.connect(ctx, c, br, req)
		return
	}
	x.forward(ctx, c, req)
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
		return nil, http.StatusForbidden, err
	}
	var last error
	for _, a := range addrs {
		c, err := x.dial(ctx, netip.AddrPortFrom(a, port))
		if err == nil {
			return c, 0, nil
		}
		last = err
	}
	return nil, http.StatusBadGateway, fmt.Errorf("connect to %s port %d: %w", host, port, last)
}

func (x *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := hostPort(req.RequestURI, "")
	if err != nil {
		reply(c, http.StatusBadRequest, err.Error())
		return
	}
	t, code, err := x.open(ctx, host, port)
	if err != nil {
		x.logf("proxy: CONNECT %s: %v", req.RequestURI, err)
		reply(c, code, err.Error())
		return
	}
	defer t.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Bytes the client sent after the head (a TLS hello) go first.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := t.Write(b); err != nil {
			return
		}
	}
	pipe(c, t)
}

// hopHeaders are the proxy's own, never forwarded.
var hopHeaders = []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"}

func (x *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request) {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		reply(c, http.StatusBadRequest, "want CONNECT host:port or an absolute http:// URL")
		return
	}
	host, port, err := hostPort(req.URL.Host, "80")
	if err != nil {
		reply(c, http.StatusBadRequest, err.Error())
		return
	}
	t, code, err := x.open(ctx, host, port)
	if err != nil {
		x.logf("proxy: %s %s: %v", req.Method, req.URL.Redacted(), err)
		reply(c, code, err.Error())
		return
	}
	defer t.Close()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Close = true
	if err := req.Write(t); err != nil {
		return
	}
	_, _ = io.Copy(c, t)
}

// pipe copies both ways until both directions are done, passing on a
// half-close.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { half(a, b) })
	wg.Go(func() { half(b, a) })
	wg.Wait()
}

// reply writes a short response the agent can read.
func reply(c net.Conn, code int, msg string) {
	body := proxyUserAgent + ": " + msg + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
