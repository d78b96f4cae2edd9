package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errUnsupported = errors.New("seccomp: no filter for this architecture")

// Install sets no_new_privs and loads prog on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC). The filter is inherited across fork and
// execve and cannot be removed.
func Install(prog []Instruction) error {
	if len(prog) == 0 {
		return errors.New("seccomp: empty program")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	filters := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filters[i] = unix.SockFilter{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: load filter: %w", errno)
	case r != 0:
		// TSYNC names a thread it could not synchronise.
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
