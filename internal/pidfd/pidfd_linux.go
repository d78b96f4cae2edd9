package pidfd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Watch calls then(true) from a goroutine once the process of the
// non-blocking pidfd f has exited, or then(false) if ctx ends first.
func Watch(ctx context.Context, f *os.File, then func(exited bool)) error {
	// A descriptor the poller does not take would block a thread in Read.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("pidfd not pollable: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	go func() {
		defer stop()
		// A pidfd reads as ready once its process has exited.
		err := rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				n, err := unix.Poll(fds, 0)
				if !errors.Is(err, unix.EINTR) {
					return err != nil || n > 0
				}
			}
		})
		then(err == nil)
	}()
	return nil
}
