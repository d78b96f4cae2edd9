package runspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Unlimited is an rlimit value without a limit (RLIM_INFINITY).
const Unlimited = math.MaxUint64

// Rlimits are per-process resource limits by name (RlimitNames, see
// getrlimit(2)). Each sets both the soft and the hard limit.
type Rlimits map[string]RlimitValue

// RlimitValue is one limit; Unlimited means none.
type RlimitValue uint64

// RlimitNames are the names Rlimits accepts.
var RlimitNames = []string{"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rtprio", "rttime", "sigpending", "stack"}

// MarshalJSON writes Unlimited as "unlimited": JSON numbers lose
// precision past 2^53.
func (r RlimitValue) MarshalJSON() ([]byte, error) {
	if r == Unlimited {
		return []byte(`"unlimited"`), nil
	}
	return []byte(strconv.FormatUint(uint64(r), 10)), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RlimitValue) UnmarshalJSON(b []byte) error {
	if string(b) == `"unlimited"` {
		*r = Unlimited
		return nil
	}
	var v uint64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("rlimit %s: want an integer or \"unlimited\"", b)
	}
	*r = RlimitValue(v)
	return nil
}

// Limits bound a run's resources; sizes are bytes. Pids always holds
// (RLIMIT_NPROC, counted in the agent's own user namespace, so per run);
// Memory and CPUs need the node's delegated cgroup v2, and a run whose
// limits set them fails to start without one rather than run unbounded.
type Limits struct {
	// Pids caps the agent's processes and threads (default 1024).
	Pids int `json:"pids,omitempty"`
	// Memory caps the run's memory (cgroup memory.max).
	Memory uint64 `json:"memory,omitempty"`
	// CPUs caps the run's CPU time in cores, e.g. 1.5 (cgroup cpu.max).
	CPUs float64 `json:"cpus,omitempty"`
	// Tmp is the size of the sandbox's /tmp (default 1GiB); it is memory.
	Tmp uint64 `json:"tmp,omitempty"`
	// Disk bounds what the run writes in its workspace (default
	// DefaultDiskBytes): a root worker gives each run a filesystem of
	// this size.
	Disk uint64 `json:"disk,omitempty"`
	// Rlimits are per-process limits.
	Rlimits Rlimits `json:"rlimits,omitempty"`
	// Output caps the bytes the agent may print on stdout; past it the
	// agent is killed and the run fails.
	Output uint64 `json:"output,omitempty"`
	// Outputs caps the bytes a run's capture stores, diff and files
	// together; 0: the outputs package's default.
	Outputs uint64 `json:"outputs,omitempty"`
	// Stderr bounds the agent's stderr kept on the node (stderr.log, of
	// which only the tail is published): past it the oldest bytes go
	// (default DefaultStderrBytes).
	Stderr uint64 `json:"stderr,omitempty"`
}

// StderrBytes is l.Stderr, or its default.
func (l Limits) StderrBytes() uint64 {
	if l.Stderr == 0 {
		return DefaultStderrBytes
	}
	return l.Stderr
}

// DiskBytes is l.Disk, or its default: the size of a root worker's
// workspace filesystem, and the largest file the agent may write.
func (l Limits) DiskBytes() uint64 {
	if l.Disk == 0 {
		return DefaultDiskBytes
	}
	return l.Disk
}

// Bounds of Limits.
const (
	maxPids = 1 << 22 // pid_max
	minTmp  = 1 << 20
	// MinDiskBytes is the smallest limits.disk: the smallest useful ext4.
	MinDiskBytes = 16 << 20
	maxDisk      = 16 << 40 // ext4 with 4KiB blocks
	// DefaultDiskBytes is limits.disk when a profile does not set it.
	DefaultDiskBytes = 4 << 30
	// DefaultPids is limits.pids when a profile does not set it.
	DefaultPids = 1024
	// DefaultTmpBytes is limits.tmp when a profile does not set it.
	DefaultTmpBytes = 1 << 30
	// minOutput leaves room for an agent's first lines.
	minOutput = 4 << 10
	// DefaultStderrBytes is limits.stderr when a profile does not set
	// it: far more than the published tail (2 KiB), little beside a
	// workspace.
	DefaultStderrBytes = 1 << 20
	minStderr          = 4 << 10
	maxStderr          = 1 << 30
)

// Validate reports every problem of the limits, each starting with its key.
func (l Limits) Validate() error {
	var errs []error
	if l.Pids < 0 || l.Pids > maxPids {
		errs = append(errs, fmt.Errorf("pids: %d is out of range 1..%d", l.Pids, maxPids))
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) || l.CPUs > 1<<16 {
		errs = append(errs, fmt.Errorf("cpus: %v is not a number of cores", l.CPUs))
	} else if l.CPUs > 0 && l.CPUs < 0.01 {
		errs = append(errs, fmt.Errorf("cpus: %v is below 0.01", l.CPUs))
	}
	if l.Memory != 0 && l.Memory < minTmp {
		errs = append(errs, fmt.Errorf("memory: %d bytes is below 1MiB", l.Memory))
	}
	if l.Output != 0 && l.Output < minOutput {
		errs = append(errs, fmt.Errorf("output: %d bytes is below 4KiB", l.Output))
	}
	if l.Stderr != 0 && (l.Stderr < minStderr || l.Stderr > maxStderr) {
		errs = append(errs, fmt.Errorf("stderr: %d bytes is out of range 4KiB..1GiB", l.Stderr))
	}
	if l.Tmp != 0 && l.Tmp < minTmp {
		errs = append(errs, fmt.Errorf("tmp: %d bytes is below 1MiB", l.Tmp))
	}
	if l.Disk != 0 && (l.Disk < MinDiskBytes || l.Disk > maxDisk) {
		errs = append(errs, fmt.Errorf("disk: %d bytes is out of range 16MiB..16TiB", l.Disk))
	}
	names := make([]string, 0, len(l.Rlimits))
	for n := range l.Rlimits {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !slices.Contains(RlimitNames, n) {
			errs = append(errs, fmt.Errorf("rlimits: unknown limit %q (known: %s)", n, strings.Join(RlimitNames, ", ")))
		}
	}
	return errors.Join(errs...)
}
