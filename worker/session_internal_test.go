package worker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// TestSetupArgv runs the setup wrapper with sh: each command named, then
// its output (stderr too), in order; the first that fails ends it with
// its exit code, said on stderr; else the agent takes its place.
func TestSetupArgv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  []string
		goIn   time.Duration // when the go file appears (-1: before the start)
		stdout string
		stderr string
		exit   int
	}{
		{"all pass", []string{"echo one", "echo 'two' >&2", `printf '%s\n' "it's quoted"`}, -1,
			"baton setup 1/3: echo one\none\nbaton setup 2/3: echo 'two' >&2\ntwo\nbaton setup 3/3: printf '%s\\n' \"it's quoted\"\nit's quoted\n" +
				setupDoneLine + "\nagent ran with a b\n", "", 0},
		{"the agent waits for the checkpoint", []string{"true"}, 300 * time.Millisecond,
			"baton setup 1/1: true\n" + setupDoneLine + "\nagent ran with a b\n", "", 0},
		{"the second fails", []string{"echo one", "exit 3", "echo never"}, -1,
			"baton setup 1/3: echo one\none\nbaton setup 2/3: exit 3\n", "baton setup 2/3 failed with exit code 3\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goFile := filepath.Join(t.TempDir(), setupGoName)
			touch := func() {
				if err := os.WriteFile(goFile, nil, 0o644); err != nil {
					t.Error(err)
				}
			}
			if tc.goIn < 0 {
				touch()
			} else {
				time.AfterFunc(tc.goIn, touch)
			}
			argv := setupArgv(tc.setup, goFile, []string{"/bin/sh", "-c", `echo "agent ran with $*"`, "agent", "a", "b"})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			cmd.WaitDelay = time.Second
			start := time.Now()
			err := cmd.Run()
			if took := time.Since(start); tc.goIn > 0 && took < tc.goIn {
				t.Errorf("the agent started %v after the start, before the go file (%v)", took, tc.goIn)
			}
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.stdout || errOut.String() != tc.stderr || code != tc.exit {
				t.Fatalf("stdout %q\nstderr %q\nexit %d\nwant %q, %q, %d", out.String(), errOut.String(), code, tc.stdout, tc.stderr, tc.exit)
			}
		})
	}
}

// TestIdleLimitAndPausedStatus: a session's pauseAfter comes before an
// idle timeout it is not longer than, and turns the idle end into
// "paused" only when the pause was asked.
func TestIdleLimitAndPausedStatus(t *testing.T) {
	for _, tc := range []struct {
		rec   kv.RunRecord
		limit time.Duration
		pause bool
	}{
		{kv.RunRecord{IdleTimeout: time.Minute}, time.Minute, false},
		{kv.RunRecord{Session: "s", PauseAfter: 10 * time.Second, IdleTimeout: time.Minute}, 10 * time.Second, true},
		{kv.RunRecord{Session: "s", PauseAfter: 2 * time.Minute, IdleTimeout: time.Minute}, time.Minute, false},
		{kv.RunRecord{Session: "s", PauseAfter: 10 * time.Second}, 10 * time.Second, true},
		{kv.RunRecord{PauseAfter: 10 * time.Second}, 0, false}, // no session: no pause
	} {
		if l, p := idleLimit(tc.rec); l != tc.limit || p != tc.pause {
			t.Errorf("idleLimit(%+v) = %v, %v; want %v, %v", tc.rec, l, p, tc.limit, tc.pause)
		}
	}
	idle := protocol.Status{Status: protocol.StatusTimeout, Reason: "idle"}
	if st := pausedStatus(kv.RunRecord{PauseRequested: true, PauseAfter: time.Second}, false, idle); st.Status != protocol.StatusPaused || !strings.Contains(st.Reason, "1s") {
		t.Errorf("a pause's idle end: %+v", st)
	}
	if st := pausedStatus(kv.RunRecord{PauseAfter: time.Second}, true, idle); st.Status != protocol.StatusPaused {
		t.Errorf("the idle end of a pause this worker asked: %+v", st)
	}
	if st := pausedStatus(kv.RunRecord{}, false, idle); st.Status != protocol.StatusTimeout {
		t.Errorf("an idle end with no pause: %+v", st)
	}
	if st := pausedStatus(kv.RunRecord{PauseRequested: true}, false, protocol.Status{Status: protocol.StatusSucceeded}); st.Status != protocol.StatusSucceeded {
		t.Errorf("a run that ended on its own while pausing: %+v", st)
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	old, fresh := now.Add(-31*24*time.Hour), now.Add(-time.Hour)
	recs := []kv.SessionRecord{
		{ID: "old", UpdatedAt: old},
		{ID: "fresh", UpdatedAt: fresh},
		{ID: "old-but-live", UpdatedAt: old, Live: "r"},
		{ID: "tombstone", UpdatedAt: old, Deleted: true},
	}
	if got := expired(recs, now.Add(-30*24*time.Hour)); strings.Join(got, " ") != "old" {
		t.Fatalf("expired %q, want old", got)
	}
}

func TestJournalHasLine(t *testing.T) {
	const line = "baton setup done: checkpointing the session"
	long := strings.Repeat("x", 200<<10)
	for _, tc := range []struct {
		name, journal string
		limit         int64
		want          bool
	}{
		{"first line", line + "\nmore\n", 1 << 20, true},
		{"after others", "a\nb\n" + line + "\n", 1 << 20, true},
		{"after a line longer than the buffer", long + "\n" + line + "\n", 1 << 20, true},
		{"inside a long line", long + line + "\n", 1 << 20, false},
		{"a prefix only", line + " and more\n", 1 << 20, false},
		{"not yet ended", "a\n" + line, 1 << 20, false},
		{"past the limit", "a\n" + line + "\n", 4, false},
		{"empty", "", 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(p, []byte(tc.journal), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := journalHasLine(p, tc.limit, line); err != nil || got != tc.want {
				t.Fatalf("journalHasLine = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := journalHasLine(filepath.Join(t.TempDir(), "none"), 10, line); err == nil {
		t.Fatal("no journal: no error")
	}
}
