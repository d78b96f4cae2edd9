package testenv

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHost is an HTTP server on a host of its own: a network namespace
// joined to this machine by a veth pair in a private /30, so tests can
// show traffic reaching an address that is neither loopback nor this
// machine's. It needs root and iproute2's ip.
type TestHost struct {
	// Addr is the test host's address; HostSide is this machine's end of
	// the pair (an address of the host); Prefix is the /30 holding both.
	Addr, HostSide netip.Addr
	Prefix         netip.Prefix
	// Port is the HTTP server's port on Addr.
	Port int
	// NetNS names the namespace (`ip netns exec NAME ...`).
	NetNS string
}

// URL is http://Addr:Port/path.
func (h *TestHost) URL(path string) string {
	return fmt.Sprintf("http://%s:%d%s", h.Addr, h.Port, path)
}

// NewTestHost stands up a test host serving handler, and removes it when
// the test ends. It fails the test, saying what is missing, when this
// machine cannot.
func NewTestHost(t testing.TB, handler http.Handler) *TestHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("a test host needs root (network namespaces and veth pairs): run the tests as root")
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal("a test host needs iproute2's ip: apt-get install iproute2")
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := Output(exec.Command(ipBin, args...)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	id := hex.EncodeToString(rb[:3])
	// 10.213.x.y/30, x.y random: two test hosts rarely collide, and a
	// collision fails loudly in `ip addr add`.
	n := binary.BigEndian.Uint16(rb[2:]) &^ 3
	if n == 0 {
		n = 4 // 10.213.0.0/30 is docs/real-agents.md's, which a test sets up as written
	}
	base := netip.AddrFrom4([4]byte{10, 213, byte(n >> 8), byte(n)})
	h := &TestHost{
		Prefix:   netip.PrefixFrom(base, 30),
		HostSide: base.Next(),
		Addr:     base.Next().Next(),
		NetNS:    "baton-th-" + id,
	}
	outer, inner := "btth"+id+"a", "btth"+id+"b"
	ip("netns", "add", h.NetNS)
	t.Cleanup(func() { _, _ = Output(exec.Command(ipBin, "netns", "del", h.NetNS)) })
	ip("link", "add", outer, "type", "veth", "peer", "name", inner)
	t.Cleanup(func() { _, _ = Output(exec.Command(ipBin, "link", "del", outer)) })
	ip("link", "set", inner, "netns", h.NetNS)
	ip("addr", "add", h.HostSide.String()+"/30", "dev", outer)
	ip("link", "set", outer, "up")
	ip("-n", h.NetNS, "addr", "add", h.Addr.String()+"/30", "dev", inner)
	ip("-n", h.NetNS, "link", "set", inner, "up")
	ip("-n", h.NetNS, "link", "set", "lo", "up")

	l, err := ListenIn(h.NetNS, net.JoinHostPort(h.Addr.String(), "0"))
	if err != nil {
		t.Fatalf("listen in %s: %v", h.NetNS, err)
	}
	h.Port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// ListenIn opens a TCP listener inside the named network namespace (one
// of /var/run/netns, as `ip netns add` makes): a socket keeps the
// namespace it was made in. The thread that entered the namespace ends
// with its goroutine, so no other goroutine runs there.
func ListenIn(netns, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		f, err := os.Open("/var/run/netns/" + netns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}
