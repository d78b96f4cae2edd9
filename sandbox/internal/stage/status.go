package stage

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// chainStatus is the one line runner-inner-child writes on fd 3 when the
// agent ends, and runner-inner relays to runner-outer: the agent's exit
// code (128+signal for a signal death), the signal's name, and, when the
// sandbox failed rather than the agent, why.
type chainStatus struct {
	Exit   int    `json:"exit"`
	Signal string `json:"signal"`
	Error  string `json:"error,omitempty"`
	// The agent's CPU time and peak memory (bytes), from the init's wait
	// for it: what the sentinel reports of them.
	CPUUserUsec   int64 `json:"cpuUserUsec,omitempty"`
	CPUSystemUsec int64 `json:"cpuSystemUsec,omitempty"`
	MaxRSS        int64 `json:"maxRss,omitempty"`
}

// withUsage is c with the resource use of ru, a reaped agent's.
func (c chainStatus) withUsage(ru *syscall.Rusage) chainStatus {
	c.CPUUserUsec = ru.Utime.Sec*1e6 + ru.Utime.Usec
	c.CPUSystemUsec = ru.Stime.Sec*1e6 + ru.Stime.Usec
	c.MaxRSS = ru.Maxrss << 10 // Linux counts it in KiB
	return c
}

// maxStatusLine bounds a status line; longer errors are cut to fit.
const maxStatusLine = 16 << 10

func (c chainStatus) line() []byte {
	if len(c.Error) > maxStatusLine/2 {
		c.Error = strings.ToValidUTF8(c.Error[:maxStatusLine/2], "") + "…"
	}
	return append(chain.MustJSON(c), '\n')
}

// parseStatus decodes a status line, refusing anything the chain would
// not write: one line, known fields, exit 0..255, a known signal that
// agrees with the exit code.
func parseStatus(b []byte) (chainStatus, error) {
	if len(b) > maxStatusLine {
		return chainStatus{}, fmt.Errorf("status line of %d bytes is too long", len(b))
	}
	b = bytes.TrimSuffix(b, []byte{'\n'})
	if bytes.IndexByte(b, '\n') >= 0 {
		return chainStatus{}, errors.New("status holds more than one line")
	}
	var raw struct {
		Exit          *int    `json:"exit"`
		Signal        *string `json:"signal"`
		Error         string  `json:"error"`
		CPUUserUsec   int64   `json:"cpuUserUsec"`
		CPUSystemUsec int64   `json:"cpuSystemUsec"`
		MaxRSS        int64   `json:"maxRss"`
	}
	if err := runspec.DecodeStrict(b, &raw); err != nil {
		return chainStatus{}, fmt.Errorf("status line: %w", err)
	}
	if raw.Exit == nil || raw.Signal == nil {
		return chainStatus{}, errors.New("status line lacks exit or signal")
	}
	c := chainStatus{Exit: *raw.Exit, Signal: *raw.Signal, Error: raw.Error,
		CPUUserUsec: raw.CPUUserUsec, CPUSystemUsec: raw.CPUSystemUsec, MaxRSS: raw.MaxRSS}
	if c.CPUUserUsec < 0 || c.CPUSystemUsec < 0 || c.MaxRSS < 0 {
		return chainStatus{}, errors.New("status reports negative resource use")
	}
	if c.Exit < 0 || c.Exit > 255 {
		return chainStatus{}, fmt.Errorf("status exit %d out of range", c.Exit)
	}
	if c.Signal != "" {
		sig, ok := signalNumber(c.Signal)
		if !ok {
			return chainStatus{}, fmt.Errorf("status names unknown signal %q", c.Signal)
		}
		if c.Exit != 128+int(sig) {
			return chainStatus{}, fmt.Errorf("status exit %d disagrees with signal %s", c.Exit, c.Signal)
		}
	}
	return c, nil
}

// statusOf maps a wait status to what the sentinel reports: the exit
// code, or 128+signal and the signal's name for a signal death.
func statusOf(ws syscall.WaitStatus) chainStatus {
	if ws.Signaled() {
		return chainStatus{Exit: 128 + int(ws.Signal()), Signal: signalName(ws.Signal())}
	}
	return chainStatus{Exit: ws.ExitStatus()}
}

// signalName is a signal's name without "SIG" ("KILL"), or its number for
// a signal with no name (real-time signals).
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(sig))
}

// signalNumber is the inverse of signalName.
func signalNumber(name string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(name); err == nil {
		if n <= 0 || n > 64 || unix.SignalName(syscall.Signal(n)) != "" {
			return 0, false // named signals go by name only, so each has one spelling
		}
		return syscall.Signal(n), true
	}
	if name == "" || strings.HasPrefix(name, "SIG") {
		return 0, false
	}
	sig := unix.SignalNum("SIG" + name)
	return sig, sig != 0
}

// stopRequest is why runner-outer asked the agent to stop.
type stopRequest struct {
	reason string // journal.ReasonTimeout, ReasonCancel or ReasonSignal
	signal string // for ReasonSignal: the signal the runner received
	detail string
}

// IdleReason is the detail (and the run's status reason) of a run stopped
// because its agent waited for input past its profile's idleTimeout.
const IdleReason = "idle"

// DiskFullDetail ends the reason of a failed run whose workspace was full.
const DiskFullDetail = "the workspace is full: the run reached its disk limit (limits.disk)"

// outcome is everything runner-outer knows once the chain has ended.
type outcome struct {
	status     *chainStatus // nil: the chain ended without reporting
	chainErr   string       // how runner-inner ended, when it did not report
	stop       stopRequest  // zero: nobody asked the agent to stop
	killed     bool         // the runner escalated to SIGKILL
	failure    string       // the host side of the sandbox failed (pasta)
	grace      time.Duration
	journalErr error
	diskFull   bool // the workspace had no room left when the agent ended
	// outputLimit is the limit the agent's stdout went past (it was
	// killed for it); 0 when it did not.
	outputLimit int64
}

// sentinel decides the journal's last line. A stop the runner asked for
// names the reason whatever the agent did with it; otherwise the agent's
// own end decides, and a sandbox that failed or never reported is an
// "error" with a detail a person can read.
func (o outcome) sentinel(nonce string) journal.Sentinel {
	s := journal.Sentinel{Nonce: nonce}
	switch {
	case o.killed:
		// The runner killed the sandbox, so nothing inside could report.
		s.Exit, s.Signal = 128+int(unix.SIGKILL), "KILL"
		s.Detail = fmt.Sprintf("the agent outlived the %v grace period after SIGTERM and was killed", o.grace)
	case o.status != nil:
		s.Exit, s.Signal, s.Detail = o.status.Exit, o.status.Signal, o.status.Error
		s.CPUUserUsec, s.CPUSystemUsec, s.MaxRSS = o.status.CPUUserUsec, o.status.CPUSystemUsec, o.status.MaxRSS
	case o.failure != "":
		s.Exit, s.Detail = 1, o.failure
	case o.stop.reason != "":
		// Stopped before the sandbox could report: tearing down a pid
		// namespace is a SIGKILL of everything in it.
		s.Exit, s.Signal = 128+int(unix.SIGKILL), "KILL"
		s.Detail = "the sandbox ended before it reported: " + o.chainErr
	default:
		s.Exit = 1
		s.Detail = "the sandbox ended without reporting the agent's exit: " + o.chainErr
	}
	if o.diskFull && (s.Exit != 0 || s.Signal != "") {
		// Most likely why it failed: say so, whatever else is known.
		s.Detail = strings.TrimPrefix(s.Detail+"; "+DiskFullDetail, "; ")
	}
	switch {
	case o.journalErr != nil:
		s.Reason = journal.ReasonError
		s.Detail = "journal: " + o.journalErr.Error()
	case o.outputLimit > 0:
		if o.status == nil {
			s.Exit, s.Signal = 128+int(unix.SIGKILL), "KILL"
		}
		s.Reason = journal.ReasonOutputLimit
		s.Detail = fmt.Sprintf("output limit: the agent printed more than %d bytes on stdout and was killed", o.outputLimit)
	case o.failure != "" && o.status == nil:
		s.Reason = journal.ReasonError
	case o.stop.reason != "":
		s.Reason = o.stop.reason
		if o.stop.reason == journal.ReasonSignal && s.Signal == "" {
			s.Signal = o.stop.signal
		}
		if o.stop.detail == IdleReason {
			s.Detail = IdleReason // the run's status reason
		}
	case o.status == nil || o.status.Error != "":
		s.Reason = journal.ReasonError
	case s.Signal != "":
		s.Reason = journal.ReasonSignal
	default:
		s.Reason = journal.ReasonExit
	}
	return s
}
