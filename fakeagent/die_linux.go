package fakeagent

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

// Die ends the process by sig the way the signal's default action would, so
// the parent's wait status says "killed by sig". It returns only if the
// process survived, with an error saying so.
func Die(sig syscall.Signal) error {
	// A fake crash must not leave core files in the workspace.
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	if sig != syscall.SIGKILL {
		// The Go runtime handles every signal itself (and ignores a
		// SIGSEGV sent by kill), and signal.Notify or an inherited
		// SIG_IGN would divert or drop others: restore the kernel's
		// default action. An all-zero struct sigaction means SIG_DFL, no
		// flags, empty mask, whatever the architecture's field order.
		var act [4]uint64
		const sigsetSize = 8
		if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0); e != 0 {
			return fmt.Errorf("fakeagent: reset handler of SIG%s: %w", SignalName(sig), e)
		}
	}
	if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
		return fmt.Errorf("fakeagent: kill self with SIG%s: %w", SignalName(sig), err)
	}
	// Delivery is asynchronous; give it time before admitting failure.
	time.Sleep(time.Second)
	return fmt.Errorf("fakeagent: still alive after SIG%s", SignalName(sig))
}
