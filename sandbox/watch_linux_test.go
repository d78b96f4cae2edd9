package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// TestWatchRunner: the watch stays open while the runner lives and closes
// when it ends, by a normal end (cancel) or SIGKILL; a run that never
// started, or whose runner is gone, gives a closed channel at once; an
// ended context stops the watch without closing it.
func TestWatchRunner(t *testing.T) {
	t.Parallel()
	closedWithin := func(ch <-chan struct{}, d time.Duration) bool {
		select {
		case <-ch:
			return true
		default:
		}
		select {
		case <-ch:
			return true
		case <-time.After(d):
			return false
		}
	}
	for _, tc := range []struct {
		name string
		end  func(journal.Dir) error
	}{
		{"cancel", sandbox.Cancel},
		{"SIGKILL", func(dir journal.Dir) error { killRunner(dir); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := marker(t)
			spec := newSpec(t, sh("echo started; sleep "+m)...)
			dir := start(t, spec, "")
			waitJournal(t, dir, "started\n")
			gone, err := sandbox.WatchRunner(t.Context(), dir)
			if err != nil {
				t.Fatalf("WatchRunner: %v", err)
			}
			stopped, cancel := context.WithCancel(t.Context())
			other, err := sandbox.WatchRunner(stopped, dir)
			if err != nil {
				t.Fatalf("WatchRunner: %v", err)
			}
			cancel()
			if closedWithin(gone, 300*time.Millisecond) {
				t.Fatal("the watch closed while the runner lives")
			}
			if err := tc.end(dir); err != nil {
				t.Fatal(err)
			}
			if !closedWithin(gone, 10*time.Second) {
				t.Fatal("the watch is still open 10s after the runner was ended")
			}
			if alive, err := sandbox.Alive(dir); err != nil || alive {
				t.Errorf("Alive = %v, %v once the watch closed", alive, err)
			}
			if closedWithin(other, 0) {
				t.Error("a watch whose context ended closed")
			}
			if again, err := sandbox.WatchRunner(t.Context(), dir); err != nil || !closedWithin(again, 0) {
				t.Errorf("WatchRunner of an ended run = %v; want a closed channel", err)
			}
		})
	}
	t.Run("never started", func(t *testing.T) {
		t.Parallel()
		dir := journal.Dir(filepath.Join(t.TempDir(), "never-started"))
		gone, err := sandbox.WatchRunner(t.Context(), dir)
		if err != nil || !closedWithin(gone, 0) {
			t.Errorf("WatchRunner of a run that never started = %v; want a closed channel", err)
		}
	})
	t.Run("bad pid file", func(t *testing.T) {
		t.Parallel()
		m := marker(t)
		spec := newSpec(t, sh("echo started; sleep "+m)...)
		dir := start(t, spec, "")
		waitJournal(t, dir, "started\n")
		// A pid file naming another process (this test) is refused: its
		// pidfd would say nothing about the runner.
		runner := readFile(t, dir.PID())
		writeFile(t, dir.PID(), strconv.Itoa(os.Getpid())+"\n")
		t.Cleanup(func() { writeFile(t, dir.PID(), runner) }) // before start's cleanup kills by it
		if _, err := sandbox.WatchRunner(t.Context(), dir); !errors.Is(err, sandbox.ErrNoWatch) {
			t.Errorf("WatchRunner with a pid file naming another process = %v, want ErrNoWatch", err)
		}
	})
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
