package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
)

// TestSpawnedRunnersHoldNoThread: a worker's runners live as long as their
// runs, and waiting for each to exit must not hold a thread per runner
// (cmd.Wait does, in waitid: a worker holding 200 idle runs had 209
// threads); each runner's exit is still seen, and it is reaped.
func TestSpawnedRunnersHoldNoThread(t *testing.T) {
	// A stand-in for runner-outer: it reports ready, then waits.
	runner := filepath.Join(t.TempDir(), "runner")
	if err := os.WriteFile(runner, []byte("#!/bin/sh\nprintf ok >&3\nexec 3>&-\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 30
	before := threads(t)
	pids := make([]int, 0, n)
	exits := make([]<-chan struct{}, 0, n)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for range n {
		pid, exited, err := spawnRunner(t.Context(), runner, journal.Dir(t.TempDir()), nil)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		exits = append(exits, exited)
	}
	if got := threads(t); got >= before+n/2 {
		t.Errorf("%d threads with %d runners alive, %d before them: a thread per runner", got, n, before)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill runner %d: %v", pid, err)
		}
	}
	deadline := time.After(10 * time.Second)
	for i, exited := range exits {
		select {
		case <-exited:
		case <-deadline:
			t.Fatalf("runner %d (pid %d) killed, its exit not seen within 10s", i, pids[i])
		}
		// Reaped: no zombie is left.
		if _, err := os.Stat("/proc/" + strconv.Itoa(pids[i])); !os.IsNotExist(err) {
			t.Errorf("runner %d exited but not reaped: /proc/%d: %v", i, pids[i], err)
		}
	}
}

var threadsLine = regexp.MustCompile(`(?m)^Threads:\s+(\d+)$`)

// threads is this process's thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := threadsLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Threads line in /proc/self/status")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
