package stage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
)

// initProc is the sandbox's init (runner-inner-child) as runner-outer
// holds it once runner-inner has exited: a pidfd of a process
// reparented to runner-outer, the child subreaper.
type initProc struct {
	fd *os.File
}

// receiveInit takes the init's pidfd that runner-inner sent before it
// exited. Called once runner-inner has exited, it never waits: nil with
// no error means runner-inner sent none (it failed before the sandbox ran).
func receiveInit(chain *os.File) (*initProc, error) {
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(chain.Fd()), buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's init from runner-inner: %w", err)
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) == 1 {
			fds, err = unix.ParseUnixRights(&msgs[0])
		}
		if err != nil {
			return nil, fmt.Errorf("read the sandbox's init from runner-inner: %w", err)
		}
	}
	if n == 0 && len(fds) == 0 {
		return nil, nil
	}
	if string(buf[:n]) != initMessage || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("runner-inner sent %q with %d descriptors, want %q with the init's pidfd", buf[:n], len(fds), initMessage)
	}
	// Non-blocking, so the runtime's poller waits on it.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	return &initProc{fd: os.NewFile(uintptr(fds[0]), "init-pidfd")}, nil
}

// wait returns a channel that delivers the init's wait status once it has
// exited, after reaping it. No thread blocks meanwhile.
func (p *initProc) wait() (<-chan syscall.WaitStatus, error) {
	ch := make(chan syscall.WaitStatus, 1)
	err := pidfd.Watch(context.Background(), p.fd, func(bool) {
		ws, err := waitPidfd(p.fd)
		if err != nil {
			// Not this runner's child: nothing to reap, the end is known.
			ws = syscall.WaitStatus(0xff << 8)
		}
		p.fd.Close()
		ch <- ws
	})
	if err != nil {
		return nil, fmt.Errorf("watch the sandbox's init: %w", err)
	}
	return ch, nil
}

// sigchldInfo is siginfo_t as waitid fills it for a child (the layout of
// every 64-bit Linux ABI), whose union x/sys/unix leaves opaque.
type sigchldInfo struct {
	signo, errno, code int32
	_                  int32
	pid                int32
	uid                uint32
	status             int32
	_                  [100]byte
}

// waitPidfd reaps the exited child of pidfd f and returns its wait status.
func waitPidfd(f *os.File) (syscall.WaitStatus, error) {
	var info sigchldInfo
	for {
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_PIDFD, f.Fd(), uintptr(unsafe.Pointer(&info)), unix.WEXITED, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		break
	}
	switch info.code {
	case cldExited:
		return syscall.WaitStatus(info.status&0xff) << 8, nil
	case cldKilled:
		return syscall.WaitStatus(info.status & 0x7f), nil
	case cldDumped:
		return syscall.WaitStatus(info.status&0x7f | 0x80), nil
	}
	return 0, errors.New("waitid: not an exit")
}

// si_code values of SIGCHLD (include/uapi/asm-generic/siginfo.h).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)
