package stage

import (
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExitStatus reads a child's exit status from its pidfd once the
// child is reaped, and gives up on one that is never reaped. On a kernel
// before 6.15, which keeps no exit status for a pidfd (the wait stage
// reaps on SIGCHLD there, whatever initReap says), it must give up on the
// reaped child too, never inventing a status.
func TestExitStatus(t *testing.T) {
	kept := exitInfo()
	start := func(script string) (int, *os.File) {
		pidfd := -1
		pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", script},
			&syscall.ProcAttr{Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{PidFD: &pidfd}})
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(pidfd), "pidfd")
		t.Cleanup(func() { f.Close() })
		return pid, f
	}
	pid, f := start("exit 7")
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	switch got, ok := exitStatus(f); {
	case kept && (!ok || got.ExitStatus() != 7 || got != ws):
		t.Errorf("exitStatus = %#x, %v; want the reaped status %#x (exit 7)", got, ok, ws)
	case !kept && ok:
		t.Errorf("exitStatus = %#x on a kernel that keeps no exit status for a pidfd; want none", got)
	}

	pid, f = start("exit 3")
	// A zombie: exited, never reaped here until exitStatus gave up.
	for {
		var si unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &si, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	began := time.Now()
	if got, ok := exitStatus(f); ok || time.Since(began) < exitWait {
		t.Errorf("exitStatus of an unreaped child = %#x, %v after %v; want none after %v", got, ok, time.Since(began), exitWait)
	}
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
}
