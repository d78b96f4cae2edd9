package fakeagent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnknownSignal is returned (wrapped) by ParseSignal.
var ErrUnknownSignal = errors.New("unknown signal")

// signals are the ones whose default action ends the process, so an agent
// can die by them.
var signals = []struct {
	name string
	sig  syscall.Signal
}{
	{"HUP", syscall.SIGHUP},
	{"INT", syscall.SIGINT},
	{"QUIT", syscall.SIGQUIT},
	{"ILL", syscall.SIGILL},
	{"TRAP", syscall.SIGTRAP},
	{"ABRT", syscall.SIGABRT},
	{"BUS", syscall.SIGBUS},
	{"FPE", syscall.SIGFPE},
	{"KILL", syscall.SIGKILL},
	{"USR1", syscall.SIGUSR1},
	{"SEGV", syscall.SIGSEGV},
	{"USR2", syscall.SIGUSR2},
	{"PIPE", syscall.SIGPIPE},
	{"ALRM", syscall.SIGALRM},
	{"TERM", syscall.SIGTERM},
}

// ParseSignal reads a signal by name, with or without "SIG", in any case
// ("TERM", "sigkill"), or by number ("9"). Only signals whose default action
// ends the process are accepted.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	n, numErr := strconv.Atoi(name)
	for _, e := range signals {
		if e.name == name || (numErr == nil && int(e.sig) == n) {
			return e.sig, nil
		}
	}
	return 0, fmt.Errorf("%w %q: want one of %s", ErrUnknownSignal, s, signalNames())
}

// SignalName is the name of sig without "SIG" ("TERM"), or its number if it
// is not one ParseSignal accepts.
func SignalName(sig syscall.Signal) string {
	for _, e := range signals {
		if e.sig == sig {
			return e.name
		}
	}
	return strconv.Itoa(int(sig))
}

func signalNames() string {
	names := make([]string, len(signals))
	for i, e := range signals {
		names[i] = e.name
	}
	return strings.Join(names, ", ")
}
