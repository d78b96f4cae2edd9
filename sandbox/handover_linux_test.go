package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

const handedOver = `"stage":"outer","phase":"handover","status":"ok","detail":"runner-outer-wait took over"`

// How runner-outer came to hold the worker's stop requests.
const (
	heldByReexec  = `"stage":"outer","phase":"hold-stops","status":"ok","detail":"re-exec'd with them blocked"`
	heldBySpawner = `"stage":"outer","phase":"hold-stops","status":"ok","detail":"blocked by its spawner"`
)

// spawnHeldEnv makes this test binary (TestMain) a spawner that holds the
// stops, as a worker does: it starts the run its file names, and exits.
const spawnHeldEnv = "BATON_TEST_SPAWN_HELD"

// heldSpawn is what a held spawner starts.
type heldSpawn struct {
	Spec   sandbox.Spec `json:"spec"`
	Runner string       `json:"runner"`
}

func spawnHeld(file string) int {
	sandbox.HoldStops()
	b, err := os.ReadFile(file)
	var h heldSpawn
	if err == nil {
		err = json.Unmarshal(b, &h)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = sandbox.Start(ctx, h.Spec, nil, sandbox.WithBinary(h.Runner))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "held spawner:", err)
		return 1
	}
	return 0
}

// TestStopsHeldBySpawner: a runner-outer spawned by a program that holds
// the stops (sandbox.HoldStops, as workers do) starts with them blocked
// and so does not re-exec for them; one spawned by a program that does
// not (this test binary) re-execs itself. Either way it hands over to
// runner-outer-wait and its run ends as it should.
func TestStopsHeldBySpawner(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	spec := newSpec(t, sh("echo hi; exec sleep 0.3")...)
	b, err := json.Marshal(heldSpawn{Spec: spec, Runner: runnerBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "spawn.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := journal.Dir(spec.RunDir)
	t.Cleanup(func() { killRunner(dir) })
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spawnHeldEnv+"="+f)
	if out, err := testenv.Output(cmd); err != nil {
		t.Fatalf("the held spawner: %v\n%s", err, out)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "hi\n" {
		t.Errorf("stdout %q, want \"hi\\n\"", stdout)
	}
	state := readFile(t, dir.State())
	if !strings.Contains(state, heldBySpawner) || strings.Contains(state, heldByReexec) {
		t.Errorf("state.ndjson should say the spawner held the stops (%s):\n%s", heldBySpawner, state)
	}
	if !strings.Contains(state, handedOver) {
		t.Errorf("runner-outer did not hand over:\n%s", state)
	}
}

// runnerPID is the pid in dir's pid file.
func runnerPID(t testing.TB, dir journal.Dir) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, dir.PID())))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	return pid
}

// cmdline is pid's command line, arguments after the program's name.
func cmdline(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	return strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")[1:], " ")
}

// waitState waits until state.ndjson holds want.
func waitState(t testing.TB, dir journal.Dir, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readFile(t, dir.State()), want) {
		if time.Now().After(deadline) {
			t.Fatalf("state.ndjson never held %s:\n%s", want, readFile(t, dir.State()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestOuterHandsOver: once the chain runs, runner-outer execs itself as
// runner-outer-wait (same pid), which is not dumpable, writes the job's
// input to the agent, journals what it prints, and is stopped as
// runner-outer is. The agent blocks no signal (runner-outer's held stops
// are not passed on).
func TestOuterHandsOver(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, sh("cat; grep SigBlk /proc/self/status; echo done; exec sleep "+m)...)
	dir := start(t, spec, "hello\n")
	const want = "hello\nSigBlk:\t0000000000000000\ndone\n"
	waitJournal(t, dir, "done\n")
	waitState(t, dir, handedOver)
	// This test binary does not hold the stops: the runner did.
	waitState(t, dir, heldByReexec)
	pid := runnerPID(t, dir)
	if cmd := cmdline(t, pid); !strings.HasPrefix(cmd, "runner-outer-wait --spec /proc/self/fd/") {
		t.Fatalf("the runner (pid %d) runs %q, want runner-outer-wait", pid, cmd)
	}
	// A process that is not dumpable has the files of its /proc
	// directory owned by root, whatever its uid.
	status := readFile(t, fmt.Sprintf("/proc/%d/status", pid))
	var uid int
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid, _ = strconv.Atoi(f[1])
		}
	}
	if uid == 0 {
		t.Fatalf("the runner runs as root: the test cannot tell whether it is dumpable (its uid should be the sandbox's):\n%s", status)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/environ", pid), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Fatalf("/proc/%d/environ is owned by uid %d: runner-outer-wait is dumpable", pid, st.Uid)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != want {
		t.Errorf("journal = %q, want %q", stdout, want)
	}
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
	if state := readFile(t, dir.State()); strings.Contains(state, `"phase":"handover","status":"error"`) {
		t.Errorf("a failed handover is recorded:\n%s", state)
	}
	waitPIDs(t, 0, "sleep", m)
}

// TestCancelAcrossTheHandover: a cancel (SIGUSR1) sent at any moment of
// the start, the exec included, stops the run: blocked across the exec,
// it waits for the new image, or the runner stays and acts on it. The
// cancels are spread over the first 15 ms after Start returns, where the
// handover falls on an idle machine; one run in four is cancelled as
// soon as its runner has written its pid, and one in four only once its
// handover is in the state file, so that both ends of the window are
// among them however slow the machine (under CI's load the spread alone
// fell wholly before the handover); the test fails unless both a handed
// over run and one cancelled before its handover are among them.
func TestCancelAcrossTheHandover(t *testing.T) {
	t.Parallel()
	const runs = 48
	var (
		mu                  sync.Mutex
		handed, before, not int
		wg                  sync.WaitGroup
	)
	sem := make(chan struct{}, 6)
	for i := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			m := marker(t)
			spec := newSpec(t, "/bin/sleep", m)
			if i%4 == 0 {
				// As early as the runner can be asked: from its pid file
				// on, before Start returns, so that some runs are
				// cancelled before their handover however slow the
				// machine (the spread below missed it under load).
				dir := journal.Dir(spec.RunDir)
				cancelled := make(chan error, 1)
				go func() { cancelled <- cancelEarly(dir, 15*time.Second) }()
				start(t, spec, "")
				if err := <-cancelled; err != nil {
					t.Errorf("run %d: %v", i, err)
					return
				}
			} else if i%4 == 1 {
				dir := start(t, spec, "")
				waitState(t, dir, handedOver)
				if err := sandbox.Cancel(dir); err != nil {
					t.Errorf("run %d: Cancel after the handover: %v", i, err)
					return
				}
			} else {
				dir := start(t, spec, "")
				time.Sleep(time.Duration(i) * 15 * time.Millisecond / runs)
				if err := sandbox.Cancel(dir); err != nil {
					t.Errorf("run %d: Cancel: %v", i, err)
					return
				}
			}
			dir := journal.Dir(spec.RunDir)
			_, s := waitEnd(t, dir, spec.Nonce, 15*time.Second)
			if s.Reason != journal.ReasonCancel {
				t.Errorf("run %d, cancelled %v after Start: sentinel %+v, want reason cancel; state:\n%s", i, time.Duration(i)*15*time.Millisecond/runs, s, readFile(t, dir.State()))
			}
			state := readFile(t, dir.State())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.Contains(state, handedOver):
				handed++
			case strings.Contains(state, `"phase":"handover","status":"ok","detail":"stays: `):
				before++
			default:
				not++
			}
		})
	}
	wg.Wait()
	t.Logf("%d runs: %d handed over, %d stayed for a cancel that came as they were to, %d cancelled before", runs, handed, before, not)
	if handed == 0 || not == 0 {
		t.Errorf("the cancels missed the handover's window: %d handed over, %d cancelled before", handed, not)
	}
}

// cancelEarly asks dir's runner to cancel from the moment it can be
// asked, while it is being started, trying again every 100µs within
// bound.
func cancelEarly(dir journal.Dir, bound time.Duration) error {
	end := time.Now().Add(bound)
	for {
		err := sandbox.Cancel(dir)
		if err == nil || !errors.Is(err, sandbox.ErrNotRunning) && !errors.Is(err, sandbox.ErrTryAgain) {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("no runner to cancel within %v: %w", bound, err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestOuterStays: a runner-outer that does not exec (the exec failed, or
// the run has pasta) supervises in-process the same way.
func TestOuterStays(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, sh("cat; echo done; exec sleep "+m)...)
	dir := startWith(t, stayingRunnerBinary(t), spec, "hello\n")
	waitJournal(t, dir, "hello\ndone\n")
	if cmd := cmdline(t, runnerPID(t, dir)); !strings.HasPrefix(cmd, "runner-outer --spec ") {
		t.Fatalf("the runner runs %q, want runner-outer", cmd)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "hello\ndone\n" {
		t.Errorf("journal = %q", stdout)
	}
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
	if state := readFile(t, dir.State()); strings.Contains(state, `"handover"`) {
		t.Errorf("the runner handed over:\n%s", state)
	}
}
