package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DNS message constants (RFC 1035).
const (
	dnsHeaderLen  = 12
	typeA         = 1
	typeAAAA      = 28
	classIN       = 1
	rcodeOK       = 0
	rcodeFormErr  = 1
	rcodeServFail = 2
	rcodeNotImp   = 4
	rcodeRefused  = 5
	flagQR        = 1 << 15
	flagTC        = 1 << 9 // truncated: the client asks again over TCP
	flagRD        = 1 << 8
	flagRA        = 1 << 7
	maxUDPReply   = 512
	answerTTL     = 30
	maxDNSJobs    = 64
	lookupTimeout = 5 * time.Second
)

var errFormat = errors.New("malformed DNS query")

// query is the part of a DNS query the stub looks at.
type query struct {
	id       uint16
	flags    uint16
	name     string // lower case, no trailing dot
	qtype    uint16
	qclass   uint16
	question []byte // the question section as sent
}

// parseQuery decodes a query: a header, exactly one question, no answer
// or authority records (additional records, such as EDNS, are ignored).
// It returns the id whenever the header was readable, so a malformed
// query can still get a FORMERR.
func parseQuery(b []byte) (query, error) {
	if len(b) < dnsHeaderLen {
		return query{}, errFormat
	}
	q := query{id: binary.BigEndian.Uint16(b), flags: binary.BigEndian.Uint16(b[2:])}
	qd, an, ns := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:])
	if q.flags&flagQR != 0 || qd != 1 || an != 0 || ns != 0 {
		return q, errFormat
	}
	var labels []string
	i, total := dnsHeaderLen, 0
	for {
		if i >= len(b) {
			return q, errFormat
		}
		n := int(b[i])
		i++
		if n == 0 {
			break
		}
		// Compression pointers (0xC0) and the reserved label types have
		// no place in a question.
		if n > 63 || i+n > len(b) {
			return q, errFormat
		}
		if total += n + 1; total > 254 {
			return q, errFormat
		}
		label := string(b[i : i+n])
		if strings.Contains(label, ".") {
			// "a.b" as one label would read as two: such a name is no
			// allowed one.
			label = "\x00"
		}
		labels = append(labels, strings.ToLower(label))
		i += n
	}
	if i+4 > len(b) || len(labels) == 0 {
		return q, errFormat
	}
	q.qtype, q.qclass = binary.BigEndian.Uint16(b[i:]), binary.BigEndian.Uint16(b[i+2:])
	q.name = strings.Join(labels, ".")
	q.question = b[dnsHeaderLen : i+4]
	return q, nil
}

// reply builds a response to q with rcode and answers (A records for IPv4
// addresses, AAAA for IPv6), as many as fit in limit bytes.
func (q query) reply(rcode int, answers []netip.Addr, limit int) []byte {
	flags := flagQR | flagRA | q.flags&(0xf<<11|flagRD) | uint16(rcode)
	b := make([]byte, dnsHeaderLen, limit)
	binary.BigEndian.PutUint16(b, q.id)
	binary.BigEndian.PutUint16(b[2:], flags)
	if q.question == nil {
		return b // FORMERR for a question we could not read: no question
	}
	binary.BigEndian.PutUint16(b[4:], 1)
	b = append(b, q.question...)
	n := 0
	for _, a := range answers {
		rr := []byte{0xc0, dnsHeaderLen} // the name: a pointer to the question's
		if a.Is4() {
			rr = binary.BigEndian.AppendUint16(rr, typeA)
		} else {
			rr = binary.BigEndian.AppendUint16(rr, typeAAAA)
		}
		rr = binary.BigEndian.AppendUint16(rr, classIN)
		rr = binary.BigEndian.AppendUint32(rr, answerTTL)
		raw := a.AsSlice()
		rr = binary.BigEndian.AppendUint16(rr, uint16(len(raw)))
		rr = append(rr, raw...)
		if len(b)+len(rr) > limit {
			break
		}
		b = append(b, rr...)
		n++
	}
	binary.BigEndian.PutUint16(b[6:], uint16(n))
	if n < len(answers) {
		// Some answers did not fit: say so, or a client takes the part for
		// the whole (RFC 1035 4.1.1, RFC 7766).
		binary.BigEndian.PutUint16(b[2:], flags|flagTC)
	}
	return b
}

// DNS is the stub resolver the agent's /etc/resolv.conf names.
type DNS struct {
	policy  *Policy
	logf    Logf
	refused func(Outcome)
	jobs    chan struct{}
}

// DNSOption configures NewDNS.
type DNSOption func(*DNS)

// OnRefusedQuery has the stub call f with an Outcome for each query the
// policy refused (method "DNS", port 53, Reason why): a name off the
// allowlist, or one whose addresses it forbids. Answered queries have
// none: the connection the agent then makes through the proxy does.
func OnRefusedQuery(f func(Outcome)) DNSOption { return func(d *DNS) { d.refused = f } }

// NewDNS is a stub answering for p. logf may be nil.
func NewDNS(p *Policy, logf Logf, opts ...DNSOption) *DNS {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := &DNS{policy: p, logf: logf, refused: func(Outcome) {}, jobs: make(chan struct{}, maxDNSJobs)}
	for _, o := range opts {
		o(d)
	}
	return d
}

// refuse reports a query for name the policy refused, for why.
func (d *DNS) refuse(start time.Time, name string, why error) {
	d.logf("dns: refused %q: %v", name, why)
	d.refused(Outcome{Start: start, Host: name, Port: 53, Method: "DNS", Reason: why.Error(), Duration: time.Since(start)})
}

// answer decides the response to one query message; nil means drop it.
func (d *DNS) answer(ctx context.Context, msg []byte, limit int) []byte {
	start := time.Now()
	q, err := parseQuery(msg)
	switch {
	case err != nil && len(msg) < dnsHeaderLen:
		return nil
	case err != nil:
		q.question = nil
		return q.reply(rcodeFormErr, nil, limit)
	case q.flags>>11&0xf != 0: // only standard queries
		return q.reply(rcodeNotImp, nil, limit)
	case q.qclass != classIN:
		d.refuse(start, q.name, fmt.Errorf("class %d: only IN is answered", q.qclass))
		return q.reply(rcodeRefused, nil, limit)
	case !d.policy.AllowsName(q.name):
		// Refused without a lookup: nothing of the name leaves the host.
		d.refuse(start, q.name, ErrNotAllowed)
		return q.reply(rcodeRefused, nil, limit)
	case q.qtype != typeA && q.qtype != typeAAAA:
		return q.reply(rcodeOK, nil, limit) // the name exists; no such record
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := d.policy.Lookup(ctx, q.name)
	switch {
	case errors.Is(err, ErrRefused):
		d.refuse(start, q.name, err)
		return q.reply(rcodeOK, nil, limit)
	case err != nil:
		d.logf("dns: %q: %v", q.name, err)
		return q.reply(rcodeServFail, nil, limit)
	}
	var want []netip.Addr
	for _, a := range addrs {
		if a.Is4() == (q.qtype == typeA) {
			want = append(want, a)
		}
	}
	return q.reply(rcodeOK, want, limit)
}

// ServeUDP answers queries on pc until ctx ends or pc fails; it closes pc.
func (d *DNS) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		msg := append([]byte(nil), buf[:n]...)
		select {
		case d.jobs <- struct{}{}:
		default:
			continue // overloaded: the client retries
		}
		wg.Go(func() {
			defer func() { <-d.jobs }()
			if r := d.answer(ctx, msg, maxUDPReply); r != nil {
				_, _ = pc.WriteTo(r, from)
			}
		})
	}
}

// ServeTCP answers length-prefixed queries on connections accepted from l
// until ctx ends or l fails; it closes l.
func (d *DNS) ServeTCP(ctx context.Context, l net.Listener) error {
	return serveConns(ctx, l, d.jobs, func(net.Conn) {}, func(c net.Conn) {
		for {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			var n uint16
			if err := binary.Read(c, binary.BigEndian, &n); err != nil {
				return
			}
			msg := make([]byte, n)
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			r := d.answer(ctx, msg, 65535)
			if r == nil {
				return
			}
			if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(r)))); err != nil {
				return
			}
			if _, err := c.Write(r); err != nil {
				return
			}
		}
	})
}
