package egress

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

// ErrSecretMisplaced: a request carried a secret's placeholder to a host
// the secret is not for, over plain HTTP, or in a CONNECT target.
var ErrSecretMisplaced = errors.New("secret sent to a host not listed for it")

// SecretError is a refusal for a misplaced placeholder: it names the
// secret, never its value, and says where the placeholder went.
type SecretError struct {
	Name, Host string
	Where      Where
}

// Where is where a placeholder was sent.
type Where int

const (
	// InterceptedHost: in a request to a host the proxy terminates TLS
	// for, which the secret is not for.
	InterceptedHost Where = iota
	// PlainHTTP: in a plain-HTTP request, where no secret ever goes.
	PlainHTTP
	// ConnectTarget: in a CONNECT target, which is never a placeholder.
	ConnectTarget
)

func (e *SecretError) Error() string {
	switch e.Where {
	case PlainHTTP:
		return fmt.Sprintf("secret %s sent over plain HTTP to %s: a secret goes only to its hosts, over HTTPS", e.Name, e.Host)
	case ConnectTarget:
		return fmt.Sprintf("secret %s sent in a CONNECT target (%s)", e.Name, e.Host)
	}
	return fmt.Sprintf("secret %s sent to a host not listed for it (%s)", e.Name, e.Host)
}

func (e *SecretError) Is(target error) bool { return target == ErrSecretMisplaced }

// Secrets are a run's secrets as the proxy applies them: the CA it
// terminates their hosts' TLS with, and the client that completes TLS to
// those hosts, checked against their roots.
type Secrets struct {
	list     []runspec.Secret
	ca       CA
	upstream func(c net.Conn, host string) (net.Conn, string, error)
}

// NewSecrets are n's secrets, with ca (NewCA of their hosts). The roots
// are the host's, and n.UpstreamCA's.
func NewSecrets(n runspec.Network, ca CA) (*Secrets, error) {
	if err := TLSReady(); err != nil {
		return nil, err
	}
	up, err := given.upstream(n.UpstreamCA)
	if err != nil {
		return nil, err
	}
	return &Secrets{list: n.Secrets, ca: ca, upstream: up}, nil
}

// SecretHosts are the hosts of secrets, each once, in order.
func SecretHosts(secrets []runspec.Secret) []string {
	var hosts []string
	for _, s := range secrets {
		for _, h := range s.Hosts {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}

// intercepts reports whether the proxy terminates TLS to host: a secret
// is for it.
func (s *Secrets) intercepts(host string) bool {
	return s != nil && slices.ContainsFunc(s.list, func(sec runspec.Secret) bool { return sec.For(host) })
}

// misplaced finds in b, a request head or a part of a body sent to host,
// the placeholder of a secret that may not go there, in the clear or in a
// Basic credential: to an InterceptedHost, a secret not for it; anywhere
// else, any secret.
func (s *Secrets) misplaced(host string, where Where, b []byte) error {
	if s == nil {
		return nil
	}
	basic := basicCredentials(b)
	for _, sec := range s.list {
		if where == InterceptedHost && sec.For(host) {
			continue
		}
		ph := []byte(sec.Placeholder)
		if bytes.Contains(b, ph) || slices.ContainsFunc(basic, func(c []byte) bool { return bytes.Contains(c, ph) }) {
			return &SecretError{Name: sec.Name, Host: host, Where: where}
		}
	}
	return nil
}

// basicCredentials are the decoded credentials of the Basic
// authorizations in a request head.
func basicCredentials(head []byte) [][]byte {
	var out [][]byte
	for line := range bytes.Lines(head) {
		_, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		scheme, cred, ok := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
		if ok && bytes.EqualFold(scheme, []byte("basic")) {
			if d, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(cred))); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// readHead reads a request head as it came, up to and with its empty
// line, at most max bytes; it skips empty lines before it (RFC 9112
// section 2.2). io.EOF: the connection ended between requests.
func readHead(br *bufio.Reader, max int) ([]byte, error) {
	var head []byte
	skipped := 0 // empty lines count against max too
	lineStart := 0
	for {
		part, err := br.ReadSlice('\n')
		if skipped+len(head)+len(part) > max {
			return nil, errHeadTooLarge
		}
		head = append(head, part...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the line goes on
		case err != nil:
			if errors.Is(err, io.EOF) && len(head) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := string(head[lineStart:])
		empty := line == "\r\n" || line == "\n"
		switch {
		case empty && lineStart == 0:
			skipped += len(line)
			head = head[:0]
		case empty:
			return head, nil
		default:
			lineStart = len(head)
		}
	}
}

var errHeadTooLarge = errors.New("request head too large")

// rewriteHead is an intercepted request's head for host, as it goes
// upstream: each secret for host put in place of its placeholder in its
// header, lines kept in their order and ended with CRLF. It refuses a
// head carrying the placeholder of a secret not for host (SecretError),
// and returns the names of the secrets it put in.
func (s *Secrets) rewriteHead(head []byte, host string) ([]byte, []string, error) {
	if err := s.misplaced(host, InterceptedHost, head); err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	var swapped []string
	first := true
	for line := range bytes.Lines(head) {
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if first || len(line) == 0 {
			first = false
			out.Write(line)
			out.WriteString("\r\n")
			continue
		}
		name, value, ok := strings.Cut(string(line), ":")
		if !ok {
			return nil, nil, errMalformed
		}
		for _, sec := range s.list {
			if !sec.For(host) {
				continue
			}
			if v, ok := swap(sec, name, strings.TrimSpace(value)); ok {
				value = " " + v
				if !slices.Contains(swapped, sec.Name) {
					swapped = append(swapped, sec.Name)
				}
				break
			}
		}
		out.WriteString(name)
		out.WriteString(":")
		out.WriteString(value)
		out.WriteString("\r\n")
	}
	return out.Bytes(), swapped, nil
}

// swap is the header value v of header name with sec's value in place of
// its placeholder, if name is sec's header and v holds it as that header
// does.
func swap(sec runspec.Secret, name, v string) (string, bool) {
	switch sec.Header {
	case runspec.HeaderAPIKey:
		if strings.EqualFold(name, "x-api-key") && v == sec.Placeholder {
			return sec.Value, true
		}
	case runspec.HeaderAuthorization:
		scheme, tok, ok := strings.Cut(v, " ")
		if strings.EqualFold(name, "authorization") && ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) == sec.Placeholder {
			return scheme + " " + sec.Value, true
		}
	case runspec.HeaderBasic:
		scheme, cred, ok := strings.Cut(v, " ")
		if !strings.EqualFold(name, "authorization") || !ok || !strings.EqualFold(scheme, "basic") {
			return "", false
		}
		d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", false
		}
		user, pass, ok := strings.Cut(string(d), ":")
		if ok && pass == sec.Placeholder {
			return scheme + " " + base64.StdEncoding.EncodeToString([]byte(user+":"+sec.Value)), true
		}
	}
	return "", false
}

// scanWriter passes a body on to w, holding back the bytes that could
// start a placeholder until what follows shows they do not: a misplaced
// placeholder (Secrets.misplaced) fails the write before any of it has
// gone. A tripwire for an agent that sends the placeholder as it is.
type scanWriter struct {
	w       io.Writer
	check   func([]byte) error
	keep    int
	pending []byte
}

func (s *Secrets) scanner(w io.Writer, host string, where Where) *scanWriter {
	keep := 0
	for _, sec := range s.list {
		keep = max(keep, len(sec.Placeholder)-1)
	}
	return &scanWriter{w: w, keep: keep, check: func(b []byte) error { return s.misplaced(host, where, b) }}
}

func (sw *scanWriter) Write(p []byte) (int, error) {
	sw.pending = append(sw.pending, p...)
	if err := sw.check(sw.pending); err != nil {
		return 0, err
	}
	if n := len(sw.pending) - sw.keep; n > 0 {
		if _, err := sw.w.Write(sw.pending[:n]); err != nil {
			return 0, err
		}
		sw.pending = append(sw.pending[:0], sw.pending[n:]...)
	}
	return len(p), nil
}

// flush writes what was held back, at the end of a body.
func (sw *scanWriter) flush() error {
	_, err := sw.w.Write(sw.pending)
	sw.pending = sw.pending[:0]
	return err
}
