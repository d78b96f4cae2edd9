package bounded

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killGroup puts cmd in a process group of its own and kills the group
// when the test ends: the sleeps these tests leave behind.
func killGroup(t *testing.T, cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
}

func TestOutput(t *testing.T) {
	out, err := Output(context.Background(), 10*time.Second, exec.Command("/bin/sh", "-c", "echo out; echo err >&2"))
	if err != nil || string(out) != "out\nerr\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	_, err = Output(context.Background(), 10*time.Second, exec.Command("/bin/sh", "-c", "exit 3"))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.HasPrefix(err.Error(), "/bin/sh -c exit 3: ") {
		t.Fatalf("exit 3: %v", err)
	}
}

// A process that never ends is killed at the limit, and a grandchild
// holding its output open delays Wait by WaitDelay at most.
func TestOutputHangs(t *testing.T) {
	for _, script := range []string{
		"echo started; exec sleep 3600",
		"echo started; sleep 3600", // sh killed, sleep keeps the pipe
	} {
		t.Run(script, func(t *testing.T) {
			began := time.Now()
			cmd := exec.Command("/bin/sh", "-c", script)
			killGroup(t, cmd)
			out, err := Output(context.Background(), 300*time.Millisecond, cmd)
			took := time.Since(began)
			if !errors.Is(err, ErrTimeout) || !strings.HasPrefix(err.Error(), "/bin/sh -c "+script+": timed out: did not end within 300ms, killed") {
				t.Fatalf("err = %v, want ErrTimeout naming the command", err)
			}
			if string(out) != "started\n" {
				t.Errorf("output %q", out)
			}
			if took > 300*time.Millisecond+WaitDelay+2*time.Second {
				t.Errorf("returned after %v", took)
			}
		})
	}
}

func TestOutputCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Output(ctx, time.Minute, exec.Command("sleep", "3600"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestOutputKeepsLimit(t *testing.T) {
	out, err := Output(context.Background(), 10*time.Second, exec.Command("/bin/sh", "-c", "head -c 200000 /dev/zero"))
	if err != nil || len(out) != MaxOutput {
		t.Fatalf("kept %d bytes, %v; want %d", len(out), err, MaxOutput)
	}
}

func TestCommandWaitDelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := Command(ctx, "/bin/sh", "-c", "sleep 3600; true")
	killGroup(t, cmd)
	var b Buffer
	b.Limit = 10
	cmd.Stdout = &b
	began := time.Now()
	if err := cmd.Run(); err == nil {
		t.Fatal("a killed command succeeded")
	}
	if took := time.Since(began); took > 300*time.Millisecond+WaitDelay+2*time.Second {
		t.Errorf("Run returned after %v", took)
	}
}
