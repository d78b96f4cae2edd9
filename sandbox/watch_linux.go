package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// ErrNoWatch: the run's runner cannot be watched through an event (no pid
// file yet, a pid that is not the lock's holder, a pidfd the poller does
// not take); the caller falls back to probing Alive.
var ErrNoWatch = errors.New("sandbox: cannot watch the runner")

// WatchRunner returns a channel that closes once no runner holds the run.
// The runner's pid (from its pid file, checked to be the holder of the
// run's lock, as Cancel does) is pinned with a pidfd, which the Go
// poller wakes on when the process exits: the watch costs a parked
// goroutine and an epoll registration, and no periodic work. The lock
// (close-on-exec, held by runner-outer alone) is released at the same
// exit, so the close means what Alive false means. When ctx ends the
// watch stops and the channel stays open.
func WatchRunner(ctx context.Context, dir journal.Dir) (<-chan struct{}, error) {
	gone := make(chan struct{})
	ended := func() (<-chan struct{}, error) {
		switch alive, err := Alive(dir); {
		case err != nil:
			return nil, err
		case alive:
			return nil, fmt.Errorf("%w: its pid file names no live holder of the lock", ErrNoWatch)
		}
		close(gone)
		return gone, nil
	}
	b, err := readPIDFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if ch, err := ended(); err == nil || !errors.Is(err, ErrNoWatch) {
			return ch, err
		}
		return nil, fmt.Errorf("%w: the runner has not written its pid yet", ErrNoWatch)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read the runner's pid: %w", err)
	}
	pid, err := chain.ParsePID(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoWatch, err)
	}
	pfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return ended()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: pidfd of runner %d: %w", ErrNoWatch, pid, err)
	}
	f := os.NewFile(uintptr(pfd), "pidfd")
	// Pinned: pid is the lock's holder now, so the pidfd is the runner's
	// and not a recycled pid's.
	switch err := holdsLock(dir, pid); {
	case errors.Is(err, ErrNotRunning):
		f.Close()
		return ended()
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoWatch, err)
	}
	err = pidfd.Watch(ctx, f, func(exited bool) {
		f.Close()
		if exited {
			close(gone)
		}
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoWatch, err)
	}
	return gone, nil
}
