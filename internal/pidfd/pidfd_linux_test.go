package pidfd_test

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
)

// start runs argv and returns its pidfd, non-blocking, and the command.
func start(t *testing.T, argv ...string) (*os.File, *exec.Cmd) {
	t.Helper()
	fd := -1
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "pidfd"), cmd
}

func TestWatch(t *testing.T) {
	t.Run("exit", func(t *testing.T) {
		f, cmd := start(t, "sleep", "0.1")
		defer f.Close()
		got := make(chan bool, 1)
		if err := pidfd.Watch(context.Background(), f, func(exited bool) { got <- exited }); err != nil {
			t.Fatal(err)
		}
		select {
		case exited := <-got:
			if !exited {
				t.Fatal("then(false) for a process that exited")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no call 10 s after %v was to exit", cmd.Args)
		}
	})
	t.Run("context ends first", func(t *testing.T) {
		f, _ := start(t, "sleep", "60")
		defer f.Close()
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan bool, 1)
		if err := pidfd.Watch(ctx, f, func(exited bool) { got <- exited }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			t.Fatal("then called while the process runs")
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		select {
		case exited := <-got:
			if exited {
				t.Fatal("then(true) for a process still running")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no call 10 s after the context ended")
		}
	})
}
