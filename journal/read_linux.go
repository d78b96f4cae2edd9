package journal

import (
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockedReads is ReadFrom's step (a read and the append of what it took)
// for r when r can be read with w.mu held, else nil: r is a non-blocking
// file (a pipe os.Pipe made is), whose reads never wait in the kernel.
// Bytes a read takes from it are then counted in the same step, so
// InsertAfter never sees them gone from the file and not yet appended: a
// window a goroutine parked between read(2) and the count once let a
// record into, ahead of the agent's line, under CPU load. When the file
// is empty, w.mu is let go while the runtime's poller waits for it.
func (w *Writer) lockedReads(r io.Reader, buf []byte) func() (int, error) {
	c, ok := r.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	nonblock := false
	cerr := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if cerr != nil || !nonblock {
		return nil
	}
	var (
		n       int
		stepErr error
	)
	read := func(fd uintptr) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		m, rerr := unix.Read(int(fd), buf)
		for rerr == unix.EINTR {
			m, rerr = unix.Read(int(fd), buf)
		}
		switch {
		case rerr == unix.EAGAIN:
			return false
		case rerr != nil:
			n, stepErr = 0, fmt.Errorf("journal: read: %w", rerr)
		case m == 0:
			n, stepErr = 0, io.EOF
		default:
			n, stepErr = w.appendRead(buf[:m], nil)
		}
		return true
	}
	return func() (int, error) {
		if rerr := rc.Read(read); rerr != nil {
			return 0, fmt.Errorf("journal: read: %w", rerr)
		}
		return n, stepErr
	}
}
