package chain

import (
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// heldStops are the worker's stop requests to runners (SIGUSR1, SIGUSR2),
// which no exec may lose: runner-outer runs with them blocked on every
// thread but the runtime's signal thread, which its handover blocks them
// on too before it execs, so that one sent meanwhile waits, pending, for
// the new image.
const heldStops = 1<<(unix.SIGUSR1-1) | 1<<(unix.SIGUSR2-1)

// HoldStops re-execs the calling program, first thing, with the held
// stops blocked and env added to its environment, unless this thread
// blocks them already; if the exec fails, it returns and the program goes
// on without them held. sandbox.HoldStops says why a spawner of runners
// calls it; runner-outer calls it when its spawner did not.
func HoldStops(env []string) {
	if BlockedStops() {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	set.Val[0] = heldStops
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return
	}
	_ = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), env...))
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
}

// BlockedStops reports whether this thread blocks the held stops.
func BlockedStops() bool {
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &old); err != nil {
		return false
	}
	return old.Val[0]&heldStops == heldStops
}
