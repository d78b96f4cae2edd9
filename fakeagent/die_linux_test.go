package fakeagent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
)

// dieEnv makes the test binary, re-executed, call Die instead of running tests.
const dieEnv = "FAKEAGENT_TEST_DIE"

func TestMain(m *testing.M) {
	if name := os.Getenv(dieEnv); name != "" {
		sig, err := ParseSignal(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// Divert or drop the signal first, as main's NotifyContext or a
		// parent's SIG_IGN would: Die must get through regardless.
		c := make(chan os.Signal, 1)
		switch sig {
		case syscall.SIGHUP:
			signal.Ignore(sig)
		case syscall.SIGKILL:
		default:
			signal.Notify(c, sig)
		}
		err = Die(sig)
		fmt.Fprintln(os.Stderr, "survived:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestDie runs a real process that kills itself and checks its wait status.
func TestDie(t *testing.T) {
	for _, name := range []string{"TERM", "INT", "HUP", "KILL", "SEGV", "ABRT", "USR1"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, err := ParseSignal(name)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), dieEnv+"="+name)
			cmd.Dir = t.TempDir() // a core file, if any, would land here
			out, err := testenv.Output(cmd)
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("child ended with %v, want death by SIG%s; output:\n%s", err, name, out)
			}
			ws := ee.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != want {
				t.Fatalf("child status %v, want killed by SIG%s; output:\n%s", ws, name, out)
			}
			if ws.CoreDump() {
				t.Errorf("SIG%s dumped core; Die sets RLIMIT_CORE to 0", name)
			}
		})
	}
}
