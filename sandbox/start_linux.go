package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// spawnRunner starts `binary runner-outer --spec <spec>` detached and
// waits for its readiness report. pool, if not nil, is a prestarted
// chain's socket (Prestart), passed as fd 4. exited is closed once the
// runner has exited and been reaped.
func spawnRunner(ctx context.Context, binary string, dir journal.Dir, pool *os.File) (pid int, exited <-chan struct{}, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, fmt.Errorf("sandbox: readiness pipe: %w", err)
	}
	defer r.Close()
	// Only what the runner needs: the worker's environment may hold
	// credentials, and nothing of it is the agent's.
	env := append([]string{chain.ReadyFDEnv + "=3"}, chain.StageEnv...)
	files := []*os.File{w}
	if pool != nil {
		env = append(env, chain.PoolFDEnv+"=4")
		files = append(files, pool)
	}
	cmd := &exec.Cmd{
		Path:       binary,
		Args:       []string{binary, StageOuter, "--spec", dir.Spec()},
		Env:        env,
		ExtraFiles: files,
		// Its own session: no signal for the worker's process group or
		// terminal reaches it. No Pdeathsig: it outlives the worker.
		// Stdin, Stdout and Stderr stay nil, which is /dev/null.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrStartFailed, err)
	}
	done := reapWhenExited(cmd)
	msg, err := readReady(ctx, r)
	if err != nil {
		return 0, done, fmt.Errorf("sandbox: waiting for runner %d: %w (it may still start)", cmd.Process.Pid, err)
	}
	switch {
	case msg == chain.ReadyOK:
		return cmd.Process.Pid, done, nil
	case msg != "":
		return 0, done, fmt.Errorf("%w: %s", ErrStartFailed, msg)
	}
	<-done
	return 0, done, fmt.Errorf("%w: runner-outer exited (%v) without reporting; see %s and %s",
		ErrStartFailed, cmd.ProcessState, dir.State(), dir.Stderr())
}

// readReady reads the readiness report until the runner closes its end.
func readReady(ctx context.Context, r *os.File) (string, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, 64<<10))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		return strings.TrimSpace(string(res.b)), res.err
	case <-ctx.Done():
		r.Close() // unblocks the read
		<-done
		return "", ctx.Err()
	}
}

// HoldStops re-execs the calling program, first thing, with the worker's
// stop requests to runners (SIGUSR1, SIGUSR2) blocked, unless it runs so
// already: the runtime starts every thread with the mask the process
// started with (and os/signal's thread unblocks only what it is asked
// for), while a mask changed later holds for one thread only. A program
// that spawns runners (a worker) calls it before anything else: every
// runner-outer it spawns then starts with them blocked, as it must, and
// need not re-exec itself for it (an exec of a Go program per run). A
// signal held this way in the caller itself waits, pending, unhandled.
// If the exec fails, it returns and the program goes on without them
// held; so do the runners it spawns, until they re-exec themselves.
func HoldStops() { chain.HoldStops(nil) }

// reapWhenExited reaps cmd's process once it has exited, so no zombie stays
// while the worker lives, and closes the returned channel then. It waits on
// the process's pidfd in the runtime's poller: cmd.Wait alone blocks a
// thread in waitid for as long as the runner lives, one thread per run the
// worker started (209 threads in a worker holding 200 idle runs). The pid
// cannot name another process before the reap, so the pidfd is the
// runner's. Without a pidfd (a kernel before 5.3), a goroutine waits.
func reapWhenExited(cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	reap := func() {
		_ = cmd.Wait()
		close(done)
	}
	if fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		if err := pidfd.Watch(context.Background(), f, func(bool) { f.Close(); reap() }); err == nil {
			return done
		}
		f.Close()
	}
	go reap()
	return done
}
