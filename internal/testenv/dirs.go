package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// StateDir is a worker state directory that a root worker's sandbox uid can
// traverse (t.TempDir's parents are 0700); it is removed when the test ends.
func StateDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "baton-state-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	ReleaseMountsUnder(t, d)
	return d
}

// FreePort is a loopback TCP port nothing listens on now, chosen below the
// kernel's ephemeral range: a port from that range can be taken as the
// local end of any outgoing connection (a route between cluster nodes, a
// client's) before the server meant for it binds it, or while a server
// restarted on it is down.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		p := freePortFloor + rand.IntN(low-freePortFloor)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("no free loopback port between %d and %d after 1000 tries", freePortFloor, low)
	return 0
}

const freePortFloor = 10000

var (
	portMu     sync.Mutex
	portsGiven = map[int]bool{} // never handed out twice in one test binary
)

// ephemeralLow is the bottom of the kernel's ephemeral port range (32768
// when it cannot be read or leaves too little room below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < freePortFloor+1000 {
		return 32768
	}
	return low
}

// WaitFor polls cond every 20 ms until it holds, failing the test with
// what it waited for after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
