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
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/stage"
)

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
	switch err := chain.Flock(f, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		_ = chain.Flock(f, unix.LOCK_UN)
		return false, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("sandbox: probe the run's lock: %w", err)
	}
}

// Cancel asks the run's runner to end the agent as cancelled (SIGUSR1:
// SIGTERM to the agent, SIGKILL after the grace period, sentinel reason
// "cancel"). It returns ErrNotRunning when no runner holds the run, and
// ErrTryAgain when one does but cannot be signalled yet.
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

// IdleReason is the detail (and the run's status reason) of a run stopped
// by StopIdle: its agent waited for input past its profile's idleTimeout.
const IdleReason = stage.IdleReason

// signalRunner sends sig to the runner holding dir, checked as Cancel says.
func signalRunner(dir journal.Dir, sig unix.Signal) error {
	b, err := readPIDFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		alive, aerr := Alive(dir)
		if aerr != nil {
			return aerr
		}
		if alive {
			return fmt.Errorf("%w: the runner is starting and has not written its pid yet", ErrTryAgain)
		}
		return ErrNotRunning
	}
	if err != nil {
		return fmt.Errorf("sandbox: read the runner's pid: %w", err)
	}
	pid, err := chain.ParsePID(b)
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

// holderReads bounds how often holdsLock reads /proc/locks while the
// listing and the lock disagree; holderPause is the pause between reads.
const (
	holderReads = 20
	holderPause = 5 * time.Millisecond
)

// procLocks opens the kernel's list of locks; tests replace it.
var procLocks = func() (io.ReadCloser, error) { return os.Open("/proc/locks") }

// holdsLock checks that pid holds the flock on the run's lock file:
// ErrNotRunning when nobody does, ErrNotRunner when someone else does.
//
// /proc/locks cannot be read whole at once: each read returns a page, and
// the next one resumes at an entry's index, so locks released meanwhile
// shift the rest and one can go unlisted (1,000 runs cancelled together
// did that, and a run's cancel was taken for a run already ended). So
// the listing never alone says nobody holds the lock: a try-lock does,
// and while the lock is held but its holder is not pid, the listing is
// read again, a bounded number of times (ErrTryAgain).
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
	for read := 1; ; read++ {
		holders, err := lockHolders(st.Ino)
		if err != nil {
			return err
		}
		if slices.Contains(holders, pid) {
			return nil
		}
		switch alive, err := Alive(dir); {
		case err != nil:
			return err
		case !alive:
			return ErrNotRunning
		case read < holderReads:
			time.Sleep(holderPause)
			continue
		case len(holders) == 0:
			return fmt.Errorf("%w: the run's lock is held, but /proc/locks did not list its holder in %d reads", ErrTryAgain, holderReads)
		}
		return fmt.Errorf("%w: the pid file names %d, the lock is held by %v", ErrNotRunner, pid, holders)
	}
}

// lockHolders lists the pids /proc/locks says hold a flock on inode ino.
func lockHolders(ino uint64) ([]int, error) {
	locks, err := procLocks()
	if err != nil {
		return nil, fmt.Errorf("sandbox: who holds the run's lock: %w", err)
	}
	defer locks.Close()
	holders, err := flockHolders(io.LimitReader(locks, 64<<20), ino)
	if err != nil {
		return nil, fmt.Errorf("sandbox: who holds the run's lock: %w", err)
	}
	return holders, nil
}
