package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// lockWait is how long runner-outer retries the run's lock: long enough
// to ride out an Alive probe, which holds it for an instant.
const lockWait = time.Second

// lockRun takes the run's exclusive flock for the runner's life. The lock
// file is opened close-on-exec, so no process the runner starts holds it.
func lockRun(path string) (*os.File, error) {
	f, err := journal.OpenNoLinks(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, errors.New("another runner holds the run's lock")
			}
			return nil, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// Alive reports whether a runner holds the run: the runner keeps an
// exclusive flock on dir.Lock() for its whole life, so a lock that can be
// taken means no runner (and a missing lock file means none ever ran).
func Alive(dir journal.Dir) (bool, error) {
	f, err := dir.Open(journal.LockName, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sandbox: open the run's lock: %w", err)
	}
	defer f.Close()
	switch err := flock(f, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		_ = flock(f, unix.LOCK_UN)
		return false, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("sandbox: probe the run's lock: %w", err)
	}
}

// Cancel asks the run's runner to end the agent as cancelled (SIGUSR1:
// SIGTERM to the agent, SIGKILL after the grace period, sentinel reason
// "cancel"). It returns ErrNotRunning when no runner holds the run.
//
// The pid is pinned with a pidfd, then it must be the process holding the
// flock on the run's very lock file (the kernel's /proc/locks says who
// does): so neither a recycled pid nor a pid file planted by anyone but
// the runner is ever signalled (ErrNotRunner).
func Cancel(dir journal.Dir) error { return signalRunner(dir, unix.SIGUSR1) }

// StopIdle asks the run's runner to end the agent because it waited for
// input longer than its profile's idleTimeout (SIGUSR2: stopped as Cancel
// does, sentinel reason "timeout" with detail "idle"). Its errors are
// Cancel's.
func StopIdle(dir journal.Dir) error { return signalRunner(dir, unix.SIGUSR2) }

// signalRunner sends sig to the runner holding dir, checked as Cancel says.
func signalRunner(dir journal.Dir, sig unix.Signal) error {
	b, err := readPIDFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		alive, aerr := Alive(dir)
		if aerr != nil {
			return aerr
		}
		if alive {
			return errors.New("sandbox: the runner is starting and has not written its pid yet; retry")
		}
		return ErrNotRunning
	}
	if err != nil {
		return fmt.Errorf("sandbox: read the runner's pid: %w", err)
	}
	pid, err := parsePID(b)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrNotRunning
	}
	if err != nil {
		return fmt.Errorf("sandbox: pidfd of runner %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	if err := holdsLock(dir, pid); err != nil {
		return err
	}
	if err := unix.PidfdSendSignal(pfd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return ErrNotRunning
		}
		return fmt.Errorf("sandbox: signal runner %d: %w", pid, err)
	}
	return nil
}

// readPIDFile reads the run's pid file, never through a link.
func readPIDFile(dir journal.Dir) ([]byte, error) {
	f, err := dir.Open(journal.PIDName, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64))
}

// holdsLock checks that pid holds the flock on the run's lock file:
// ErrNotRunning when nobody does, ErrNotRunner when someone else does.
func holdsLock(dir journal.Dir, pid int) error {
	f, err := dir.Open(journal.LockName, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotRunning
	}
	if err != nil {
		return fmt.Errorf("sandbox: open the run's lock: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("sandbox: stat the run's lock: %w", err)
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return fmt.Errorf("sandbox: who holds the run's lock: %w", err)
	}
	defer locks.Close()
	holders, err := flockHolders(io.LimitReader(locks, 64<<20), st.Ino)
	if err != nil {
		return fmt.Errorf("sandbox: who holds the run's lock: %w", err)
	}
	switch {
	case slices.Contains(holders, pid):
		return nil
	case len(holders) == 0:
		return ErrNotRunning
	}
	return fmt.Errorf("%w: the pid file names %d, the lock is held by %v", ErrNotRunner, pid, holders)
}
