package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
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
	f, err := os.Open(dir.Lock())
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
// The pid is pinned with a pidfd before the lock is checked: a runner
// still holding the lock after that is the process the pidfd names, so a
// recycled pid is never signalled.
func Cancel(dir journal.Dir) error {
	b, err := os.ReadFile(dir.PID())
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
	alive, err := Alive(dir)
	if err != nil {
		return err
	}
	if !alive {
		return ErrNotRunning
	}
	if err := unix.PidfdSendSignal(pfd, unix.SIGUSR1, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return ErrNotRunning
		}
		return fmt.Errorf("sandbox: signal runner %d: %w", pid, err)
	}
	return nil
}
