package testenv

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bounded"
)

// StepWait bounds each outside process a test runs to its end (a command
// of the binary under test, ip, systemctl; builds have BuildWait) and each
// wait for a started one to exit: a stuck step fails the test by itself,
// naming the command, long before the package's timeout.
const StepWait = 2 * time.Minute

// BuildWait bounds a `go build` or `go install` a test runs: compiling is
// work, which on a loaded 2-core machine (or with modules to download)
// takes minutes; a build still never outlasts the package's timeout
// without saying which one hung.
const BuildWait = 10 * time.Minute

// Build runs a go build or install, cmd, within BuildWait, as Output.
func Build(cmd *exec.Cmd) ([]byte, error) {
	return bounded.Output(context.Background(), BuildWait, cmd)
}

// Output runs cmd to its end within StepWait and returns what it wrote on
// stdout and stderr; past StepWait it is killed, and the error names it
// (see bounded.Output).
func Output(cmd *exec.Cmd) ([]byte, error) {
	return bounded.Output(context.Background(), StepWait, cmd)
}

// Proc is a long-running process a test started.
type Proc struct {
	Cmd  *exec.Cmd
	t    testing.TB
	done chan struct{}
	err  error // set before done closes
}

// Start starts cmd, with a WaitDelay unless it has one (so that its exit
// is seen even when a child of it holds its output), and kills it when the
// test ends if it still runs.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = bounded.WaitDelay
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bounded.Describe(cmd), err)
	}
	p := &Proc{Cmd: cmd, t: t, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, 0) })
	return p
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Stop sends sig and waits up to within for the process to exit, then
// kills it. It reports whether the process exited without the kill. A
// process still there StepWait after SIGKILL fails the test.
func (p *Proc) Stop(sig os.Signal, within time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(within):
	}
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(StepWait):
		p.t.Errorf("%s did not exit %v after SIGKILL", bounded.Describe(p.Cmd), StepWait)
	}
	return false
}

// Serve runs run (a worker's Run) in the background with a context that
// stop, or the test's end, cancels; then it waits for run to return, at
// most StepWait, and fails the test if run returned an error or outlived
// the bound. Serve returns once ready is closed, and fails the test if run
// returned first or ready took longer than within. stop may be called
// any number of times.
func Serve(t testing.TB, what string, ready <-chan struct{}, within time.Duration, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error // set before done closes
	go func() {
		defer close(done)
		err = run(ctx)
	}()
	var reported atomic.Bool // the error failed the test already
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case <-done:
			if err != nil && !reported.Load() {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(StepWait):
			t.Errorf("%s did not return within %v of its context's end", what, StepWait)
		}
	})
	t.Cleanup(stop)
	select {
	case <-ready:
	case <-done:
		reported.Store(true)
		t.Fatalf("%s stopped before ready: %v", what, err)
	case <-time.After(within):
		t.Fatalf("%s not ready after %v", what, within)
	}
	return stop
}
