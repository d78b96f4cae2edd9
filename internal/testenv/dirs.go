package testenv

import (
	"net"
	"os"
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

// FreePort is a loopback TCP port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
