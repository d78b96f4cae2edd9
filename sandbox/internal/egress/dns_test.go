package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildQuery encodes a standard query for name (labels split on dots).
func buildQuery(id uint16, name string, qtype uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = binary.BigEndian.AppendUint16(b, flagRD)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 0, 0, 0, 0, 0, 0)
	for _, l := range strings.Split(name, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, qtype)
	return binary.BigEndian.AppendUint16(b, classIN)
}

// parsedReply is what a test reads back from a response.
type parsedReply struct {
	id    uint16
	rcode int
	qd    int
	tc    bool // truncated
	addrs []netip.Addr
}

func parseReply(t *testing.T, b []byte) parsedReply {
	t.Helper()
	if len(b) < dnsHeaderLen {
		t.Fatalf("reply of %d bytes", len(b))
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&flagQR == 0 {
		t.Fatalf("reply without QR: %x", b)
	}
	r := parsedReply{id: binary.BigEndian.Uint16(b), rcode: int(flags & 0xf), tc: flags&flagTC != 0, qd: int(binary.BigEndian.Uint16(b[4:]))}
	an := int(binary.BigEndian.Uint16(b[6:]))
	i := dnsHeaderLen
	if r.qd == 1 {
		for b[i] != 0 {
			i += int(b[i]) + 1
		}
		i += 5
	}
	for range an {
		if b[i] != 0xc0 || b[i+1] != dnsHeaderLen {
			t.Fatalf("answer name is not a pointer to the question: %x", b[i:])
		}
		n := int(binary.BigEndian.Uint16(b[i+10:]))
		a, ok := netip.AddrFromSlice(b[i+12 : i+12+n])
		if !ok {
			t.Fatalf("bad rdata %x", b[i+12:i+12+n])
		}
		r.addrs = append(r.addrs, a)
		i += 12 + n
	}
	if i != len(b) {
		t.Fatalf("%d trailing bytes", len(b)-i)
	}
	return r
}

func TestDNSAnswer(t *testing.T) {
	p, lookups := testPolicy(t, map[string][]string{
		"api.example.com": {"93.184.216.34", "2606:2800:220:1::1", "10.1.1.1"},
		"a.example.org":   {"169.254.169.254"},
	})
	var refused []Outcome
	d := NewDNS(p, nil, OnRefusedQuery(func(o Outcome) { refused = append(refused, o) }))
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		msg   []byte
		rcode int
		addrs []string
	}{
		{"A of an allowed name", buildQuery(1, "api.example.com", typeA), rcodeOK, []string{"93.184.216.34"}},
		{"AAAA of an allowed name", buildQuery(2, "API.Example.com", typeAAAA), rcodeOK, []string{"2606:2800:220:1::1"}},
		{"pinned", buildQuery(3, "test.internal", typeA), rcodeOK, []string{"10.213.7.2"}},
		{"pinned AAAA", buildQuery(4, "test.internal", typeAAAA), rcodeOK, nil},
		{"MX of an allowed name", buildQuery(5, "api.example.com", 15), rcodeOK, nil},
		{"not allowed", buildQuery(6, "secret-data.exfil.example", typeA), rcodeRefused, nil},
		{"not allowed TXT", buildQuery(7, "c2VjcmV0.exfil.example", 16), rcodeRefused, nil},
		{"suffix itself", buildQuery(8, "example.org", typeA), rcodeRefused, nil},
		{"allowed, only a link-local address", buildQuery(9, "a.example.org", typeA), rcodeOK, nil},
		{"allowed, unknown to the resolver", buildQuery(10, "nx.example.org", typeA), rcodeServFail, nil},
	} {
		r := parseReply(t, d.answer(ctx, tc.msg, maxUDPReply))
		var want []netip.Addr
		for _, s := range tc.addrs {
			want = append(want, netip.MustParseAddr(s))
		}
		if r.id != binary.BigEndian.Uint16(tc.msg) || r.rcode != tc.rcode || r.qd != 1 || r.tc || !slices.Equal(r.addrs, want) {
			t.Errorf("%s: reply %+v, want rcode %d addrs %v", tc.name, r, tc.rcode, want)
		}
	}
	for _, l := range *lookups {
		if strings.Contains(l, "exfil") || l == "example.org" {
			t.Errorf("the stub resolved %q, which is off the list", l)
		}
	}
	// Each refusal is reported; answers, even empty or failed, are not.
	var got []string
	for _, o := range refused {
		if o.Method != "DNS" || o.Port != 53 || o.Allowed || o.Start.IsZero() || o.BytesIn != 0 || o.BytesOut != 0 {
			t.Errorf("refusal outcome %+v", o)
		}
		got = append(got, o.Host+": "+o.Reason)
	}
	want := []string{
		"secret-data.exfil.example: not on the allowlist", "c2vjcmv0.exfil.example: not on the allowlist",
		"example.org: not on the allowlist", `a.example.org: "a.example.org": address refused: 169.254.169.254 is a link-local address and no CIDR entry lists it`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("refusals reported:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// One label holding a dot must not pass for two.
	msg := buildQuery(12, "x", typeA)
	msg = append(append(msg[:dnsHeaderLen], 15), append([]byte("api.example.com"), 0, 0, 1, 0, 1)...)
	if r := parseReply(t, d.answer(ctx, msg, maxUDPReply)); r.rcode != rcodeRefused {
		t.Errorf("a single label \"api.example.com\" got rcode %d, want REFUSED", r.rcode)
	}
}

// TestDNSTruncatedSaysSo: an answer cut to fit a UDP reply sets the TC bit,
// so the client asks again over TCP, where the whole answer fits and TC is
// clear. maxAnswers AAAA records for a long name do not fit in 512 bytes.
func TestDNSTruncatedSaysSo(t *testing.T) {
	var many []string
	for i := range maxAnswers {
		many = append(many, fmt.Sprintf("2606:2800:220:1::%x", i+1))
	}
	name := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".example.org"
	p, _ := testPolicy(t, map[string][]string{name: many})
	d := NewDNS(p, nil)
	msg := buildQuery(1, name, typeAAAA)
	udp := parseReply(t, d.answer(context.Background(), msg, maxUDPReply))
	if udp.rcode != rcodeOK || len(udp.addrs) == 0 || len(udp.addrs) >= len(many) || !udp.tc {
		t.Errorf("over UDP: rcode %d, %d of %d addresses, TC %v; want some of them and TC set", udp.rcode, len(udp.addrs), len(many), udp.tc)
	}
	tcp := parseReply(t, d.answer(context.Background(), msg, 65535))
	if tcp.rcode != rcodeOK || len(tcp.addrs) != len(many) || tcp.tc {
		t.Errorf("over TCP: rcode %d, %d of %d addresses, TC %v; want all and TC clear", tcp.rcode, len(tcp.addrs), len(many), tcp.tc)
	}
}

func TestParseQueryRejects(t *testing.T) {
	good := buildQuery(7, "api.example.com", typeA)
	if q, err := parseQuery(good); err != nil || q.name != "api.example.com" || q.qtype != typeA || q.id != 7 {
		t.Fatalf("parseQuery(good) = %+v, %v", q, err)
	}
	set := func(i int, v byte) []byte { b := slices.Clone(good); b[i] = v; return b }
	for name, msg := range map[string][]byte{
		"empty":           nil,
		"short header":    good[:11],
		"a response":      set(2, good[2]|0x80),
		"two questions":   set(5, 2),
		"no question":     set(5, 0),
		"answers":         set(7, 1),
		"authority":       set(9, 1),
		"truncated name":  good[:20],
		"no type":         good[:len(good)-4],
		"half a type":     good[:len(good)-3],
		"pointer in name": set(12, 0xc0),
		"label of 64":     append(append(slices.Clone(good[:12]), 64), make([]byte, 70)...),
		"root name only":  append(slices.Clone(good[:12]), 0, 0, 1, 0, 1),
		"name over 255":   append(append(slices.Clone(good[:12]), []byte(strings.Repeat("\x3f"+strings.Repeat("a", 63), 4))...), 0, 0, 1, 0, 1),
	} {
		if _, err := parseQuery(msg); err == nil {
			t.Errorf("%s: parseQuery accepted %x", name, msg)
		}
	}
	// A readable header with a bad question gets FORMERR and no question.
	p, _ := testPolicy(t, nil)
	d := NewDNS(p, nil)
	r := parseReply(t, d.answer(context.Background(), set(5, 2), maxUDPReply))
	if r.rcode != rcodeFormErr || r.qd != 0 || r.id != 7 {
		t.Errorf("FORMERR reply %+v", r)
	}
	if d.answer(context.Background(), good[:5], maxUDPReply) != nil {
		t.Error("a message shorter than a header got a reply")
	}
	if r := parseReply(t, d.answer(context.Background(), set(2, good[2]|0x10), maxUDPReply)); r.rcode != rcodeNotImp {
		t.Errorf("an inverse query got %+v, want NOTIMP", r)
	}
}

func FuzzParseQuery(f *testing.F) {
	f.Add(buildQuery(1, "api.example.com", typeA))
	f.Add(buildQuery(2, "a.b", typeAAAA))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})
	f.Add([]byte{})
	p, err := NewPolicy(testNetwork())
	if err != nil {
		f.Fatal(err)
	}
	d := NewDNS(p, nil)
	f.Fuzz(func(t *testing.T, msg []byte) {
		q, err := parseQuery(msg)
		if err == nil {
			if len(q.name) > 253 || q.question == nil {
				t.Fatalf("accepted %q with question %x", q.name, q.question)
			}
		}
		// Whatever arrives, a reply is a well-formed response or nothing.
		if r := d.answer(context.Background(), msg, maxUDPReply); r != nil {
			if len(r) > maxUDPReply {
				t.Fatalf("reply of %d bytes", len(r))
			}
			parseReply(t, r)
		}
	})
}

func TestDNSServe(t *testing.T) {
	p, _ := testPolicy(t, map[string][]string{"api.example.com": {"93.184.216.34"}})
	d := NewDNS(p, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- d.ServeUDP(ctx, pc) }()
	go func() { done <- d.ServeTCP(ctx, l) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}()

	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(buildQuery(9, "api.example.com", typeA)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 600)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r := parseReply(t, buf[:n]); r.id != 9 || len(r.addrs) != 1 {
		t.Errorf("UDP reply %+v", r)
	}

	tc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	for i, name := range []string{"api.example.com", "nope.example"} {
		q := buildQuery(uint16(20+i), name, typeA)
		if _, err := tc.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
			t.Fatal(err)
		}
		var n uint16
		if err := binary.Read(tc, binary.BigEndian, &n); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(tc, b); err != nil {
			t.Fatal(err)
		}
		r := parseReply(t, b)
		if wantRcode := []int{rcodeOK, rcodeRefused}[i]; r.rcode != wantRcode || r.id != uint16(20+i) {
			t.Errorf("TCP reply %d: %+v", i, r)
		}
	}
}
