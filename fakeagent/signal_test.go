package fakeagent

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal
	}{
		{"TERM", syscall.SIGTERM},
		{"SIGTERM", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{" SigKill ", syscall.SIGKILL},
		{"9", syscall.SIGKILL},
		{"SEGV", syscall.SIGSEGV},
		{"11", syscall.SIGSEGV},
		{"hup", syscall.SIGHUP},
		{"ABRT", syscall.SIGABRT},
	} {
		got, err := ParseSignal(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "SIG", "STOP", "SIGCONT", "CHLD", "WINCH", "0", "-15", "19", "99", "TERMX", "SIG TERM", "15.0", "\x00"} {
		if got, err := ParseSignal(in); !errors.Is(err, ErrUnknownSignal) {
			t.Errorf("ParseSignal(%q) = %v, %v; want ErrUnknownSignal", in, got, err)
		}
	}
}

func TestSignalName(t *testing.T) {
	for _, e := range signals {
		if got := SignalName(e.sig); got != e.name {
			t.Errorf("SignalName(%d) = %q, want %q", e.sig, got, e.name)
		}
	}
	if got := SignalName(syscall.SIGCHLD); got != "17" {
		t.Errorf("SignalName(SIGCHLD) = %q, want its number", got)
	}
}

// FuzzParseSignal: any flag value is accepted or refused cleanly, and an
// accepted one names a signal that parses back to itself.
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"TERM", "sigkill", "9", "", "STOP", "-1", "999999999999999999999", "SIGSIGTERM"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			if !errors.Is(err, ErrUnknownSignal) {
				t.Fatalf("ParseSignal(%q): error %v is not ErrUnknownSignal", s, err)
			}
			return
		}
		again, err := ParseSignal(SignalName(sig))
		if err != nil || again != sig {
			t.Fatalf("ParseSignal(%q) = %v, but its name %q parses to %v, %v", s, sig, SignalName(sig), again, err)
		}
	})
}
