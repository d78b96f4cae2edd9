package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/sandbox"
)

// ErrProc: a /proc file did not read as expected.
var ErrProc = errors.New("bench: malformed /proc data")

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// parseStatCPU returns the user plus system CPU time of a process from the
// contents of /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat without a command name", ErrProc)
	}
	fields := bytes.Fields(b[i+1:])
	// After the name: state (3), ... utime (14), stime (15).
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("%w: stat has %d fields after the name", ErrProc, len(fields))
	}
	u, err1 := strconv.ParseUint(string(fields[utime]), 10, 63)
	s, err2 := strconv.ParseUint(string(fields[stime]), 10, 63)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: utime %q, stime %q", ErrProc, fields[utime], fields[stime])
	}
	if u+s > uint64(1<<63-1)/uint64(clockTick) {
		return 0, fmt.Errorf("%w: cpu ticks %d overflow", ErrProc, u+s)
	}
	return time.Duration(u+s) * clockTick, nil
}

// parseStatusRSS returns VmRSS in bytes from /proc/<pid>/status.
func parseStatusRSS(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: VmRSS line %q", ErrProc, bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, fmt.Errorf("%w: VmRSS %q", ErrProc, f[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no VmRSS", ErrProc)
}

// Process classes of sampleCPU.
const (
	classWorker = "worker"
	classRunner = "runners"
	classAgent  = "agents"
	classSuite  = "nats+subscriber"
	classOther  = "other"
)

// classify names the class of a process from its /proc/<pid>/cmdline
// (NUL-separated argv): baton's runner chain (runner-outer and, once it
// has exec'd itself, runner-outer-wait, runner-inner, runner-inner-child,
// runner-init-wait), agents (the suite's stamping agent and baton's fake
// agent), workers (baton worker or the suite's probe worker), or other.
func classify(cmdline []byte) string {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) < 2 {
		return classOther
	}
	switch sub := string(args[1]); {
	case sub == sandbox.StageOuter || sub == sandbox.StageOuterWait || sub == sandbox.StageInner || sub == sandbox.StageInnerChild || sub == sandbox.StageInitWait:
		return classRunner
	case sub == "fake-agent":
		return classAgent
	case sub == "worker":
		return classWorker
	case sub == "bench" && len(args) > 2 && string(args[2]) == "agent":
		return classAgent
	case sub == "bench" && len(args) > 2 && string(args[2]) == "worker":
		return classWorker
	}
	// Global flags come first: baton --nats URL ... bench worker.
	for i, a := range args[1:] {
		if string(a) == "bench" && i+2 < len(args) {
			switch string(args[i+2]) {
			case "worker":
				return classWorker
			case "agent":
				return classAgent
			}
		}
	}
	return classOther
}

// errRootAutogroup: the process is in the kernel's default autogroup
// (its session was never started anew since init), whose
// /proc/<pid>/autogroup reads empty and whose nice cannot be set.
var errRootAutogroup = errors.New("bench: in the default autogroup")

// parseAutogroup reads the nice value of /proc/<pid>/autogroup, which
// reads "/autogroup-<n> nice <nice>", or nothing in the default autogroup.
func parseAutogroup(b []byte) (int, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, errRootAutogroup
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || !strings.HasPrefix(f[0], "/autogroup-") || f[1] != "nice" {
		return 0, fmt.Errorf("%w: autogroup %q", ErrProc, b)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < -20 || n > 19 {
		return 0, fmt.Errorf("%w: autogroup nice %q", ErrProc, f[2])
	}
	return n, nil
}

// stateRecord is one line of a run's state.ndjson, the runner chain's
// record of its phases.
type stateRecord struct {
	Time  time.Time `json:"time"`
	Stage string    `json:"stage"`
	Phase string    `json:"phase"`
}

// phaseTimes reads a run's state.ndjson into the time of each
// "stage/phase" (the first, if one repeats). Lines that do not read as
// records are skipped: the file is the runner's diagnostics.
func phaseTimes(b []byte) map[string]time.Time {
	out := map[string]time.Time{}
	for line := range bytes.Lines(b) {
		var r stateRecord
		if json.Unmarshal(line, &r) != nil || r.Stage == "" || r.Phase == "" || r.Time.IsZero() {
			continue
		}
		k := r.Stage + "/" + r.Phase
		if _, ok := out[k]; !ok {
			out[k] = r.Time
		}
	}
	return out
}

// parseStatPPID returns the parent pid from the contents of
// /proc/<pid>/stat (field 4, counted from the last ')' as in parseStatCPU).
func parseStatPPID(b []byte) (int, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat without a command name", ErrProc)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("%w: stat has %d fields after the name", ErrProc, len(fields))
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil || ppid < 0 {
		return 0, fmt.Errorf("%w: ppid %q", ErrProc, fields[1])
	}
	return ppid, nil
}

// parsePss returns the Pss line of /proc/<pid>/smaps_rollup, in bytes: the
// process's share of the memory it maps, pages shared with n processes
// counting 1/n each, so the Pss of a set of processes adds up to what
// they cost together.
func parsePss(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("Pss:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: Pss line %q", ErrProc, bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, fmt.Errorf("%w: Pss %q", ErrProc, f[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no Pss", ErrProc)
}

// specArg is the --spec argument of a runner-outer command line, or "".
func specArg(cmdline []byte) string {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	for i := 1; i+1 < len(args); i++ {
		if string(args[i]) == "--spec" {
			return string(args[i+1])
		}
	}
	return ""
}
