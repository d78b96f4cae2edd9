package testenv

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bounded"
)

// TestProcStop: a process that ignores SIGTERM, and whose child holds its
// output open, is killed after the grace, and Stop returns within the
// grace plus bounded.WaitDelay.
func TestProcStop(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; echo up; sleep 3600; true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &bounded.Buffer{Limit: 1 << 10}
	cmd.Stdout = out
	p := Start(t, cmd)
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the sleep
	WaitFor(t, 10*time.Second, "the shell to start", func() bool { return out.String() == "up\n" })
	began := time.Now()
	if p.Stop(syscall.SIGTERM, 200*time.Millisecond) {
		t.Fatal("Stop says the shell exited on SIGTERM, which it ignores")
	}
	if took := time.Since(began); took > 200*time.Millisecond+bounded.WaitDelay+2*time.Second {
		t.Errorf("Stop took %v", took)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
	if !p.Stop(syscall.SIGTERM, time.Second) {
		t.Error("Stop of an ended process")
	}
}
