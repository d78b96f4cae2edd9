package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds each side's TLS handshake of an intercepted
// tunnel.
const handshakeTimeout = 10 * time.Second

// Intercepted is what the proxy did on a tunnel it terminated: the
// secrets it put in (their names, comma-separated, for reporting; never
// a value) and why it refused a request, if it did.
type Intercepted struct {
	Secret  string
	Refused error
}

// bufConn reads what a bufio.Reader holds before its connection: the
// bytes the agent sent right after its CONNECT (its TLS hello).
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// intercept serves a CONNECT tunnel to a secret's host (target, host) on
// t, dialled already: TLS to host checked against the roots, then TLS to
// the agent with the run's CA, then each request of the connection
// (HTTP/1.1, which is all the agent is offered) rewritten by
// Secrets.rewriteHead, its body passed on as framed; responses go back as
// they come.
func (x *Proxy) intercept(c net.Conn, br *bufio.Reader, t net.Conn, target, host string) Intercepted {
	s := x.secrets
	fail := func(code int, err error) Intercepted {
		x.logf("proxy: CONNECT %s: %v", target, err)
		reply(c, code, err.Error())
		return Intercepted{Refused: err}
	}
	_ = t.SetDeadline(time.Now().Add(handshakeTimeout))
	upc, proto, err := s.upstream(t, host)
	if err != nil {
		return fail(statusBadGateway, fmt.Errorf("TLS to %s: %w", host, err))
	}
	if proto != "" && proto != "http/1.1" {
		return fail(statusBadGateway, fmt.Errorf("TLS to %s: the server chose %q, not http/1.1", host, proto))
	}
	_ = t.SetDeadline(time.Time{})
	up := upc.(closeWriter)
	chain, key, err := s.ca.Leaf(host)
	if err != nil {
		return fail(statusBadGateway, err)
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return Intercepted{}
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	agc, err := given.server(&bufConn{Conn: c, r: br}, chain, key)
	if err != nil {
		x.logf("proxy: CONNECT %s: %v", target, err)
		return Intercepted{}
	}
	_ = c.SetDeadline(time.Time{})
	ag := agc.(closeWriter)

	// Responses go back as they come, and when the upstream side ends so
	// does the agent's, unless a refusal is to be written there. An
	// HTTP/1.1 client sends its next request after the last response, so
	// a refusal, which closes the upstream side, cuts none short.
	var refusing atomic.Bool
	back := make(chan struct{})
	go func() {
		defer close(back)
		_, _ = io.Copy(ag, up)
		if !refusing.Load() {
			_ = ag.CloseWrite()
		}
	}()
	out := x.relayRequests(ag, up, host)
	if out.Refused != nil {
		x.logf("proxy: CONNECT %s: %v", target, out.Refused)
		refusing.Store(true)
		// The socket, not TLS's close_notify, which the server could
		// answer before the close.
		t.Close()
		<-back
		code := statusBadRequest
		switch {
		case errors.Is(out.Refused, ErrSecretMisplaced):
			code = statusForbidden
		case errors.Is(out.Refused, errHeadTooLarge):
			code = statusHeadTooLarge
		}
		reply(ag, code, out.Refused.Error())
		return out
	}
	_ = up.CloseWrite()
	<-back
	return out
}

// relayRequests reads the agent's requests from ag and writes them,
// rewritten, to up, until the agent ends its side or a request is
// refused (Intercepted.Refused).
func (x *Proxy) relayRequests(ag, up net.Conn, host string) Intercepted {
	var swapped []string
	result := func(err error) Intercepted {
		return Intercepted{Secret: strings.Join(swapped, ","), Refused: err}
	}
	abr := bufio.NewReader(ag)
	for {
		_ = ag.SetReadDeadline(time.Now().Add(idleRequest))
		raw, err := readHead(abr, maxHead)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isTimeout(err) {
				return result(nil)
			}
			if errors.Is(err, errHeadTooLarge) {
				return result(err)
			}
			return result(fmt.Errorf("malformed request head: %v", err))
		}
		_ = ag.SetReadDeadline(time.Time{})
		req, err := readRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return result(fmt.Errorf("malformed request head: %v", err))
		}
		chunked, size, code, msg := framing(req.header)
		if code != 0 {
			return result(fmt.Errorf("refused request: %s", msg))
		}
		head, names, err := x.secrets.rewriteHead(raw, host)
		if err != nil {
			return result(err)
		}
		for _, n := range names {
			if !slices.Contains(swapped, n) {
				swapped = append(swapped, n)
			}
		}
		if _, err := up.Write(head); err != nil {
			return result(nil)
		}
		if err := x.copyBody(up, abr, host, InterceptedHost, chunked, size); err != nil {
			if errors.Is(err, ErrSecretMisplaced) {
				return result(err)
			}
			return result(nil)
		}
		if len(req.header["Upgrade"]) > 0 {
			// Past a protocol switch (a WebSocket) the stream is no
			// longer requests: it goes as it comes, unread; the
			// secrets were put in the request that asked for it.
			_, _ = io.Copy(up, abr)
			return result(nil)
		}
	}
}

// idleRequest bounds the wait for an intercepted connection's next
// request, as an HTTP server's idle timeout does.
const idleRequest = 5 * time.Minute

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
