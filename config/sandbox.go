package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/protocol"
)

// Mount binds a host path into the sandbox. In YAML it is a path (bound
// read-only at the same path) or a mapping {source, target, writable}.
type Mount struct {
	// Source is the host path, absolute. It must exist when a run starts
	// and be reachable by the sandbox's uid.
	Source string `yaml:"source" json:"source"`
	// Target is where the agent sees it (default: Source).
	Target string `yaml:"target" json:"target,omitempty"`
	// Writable lets the agent write through the mount; default read-only.
	Writable bool `yaml:"writable" json:"writable,omitempty"`
}

// UnmarshalYAML accepts a path or {source, target, writable}.
func (m *Mount) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	if node.Kind == yaml.ScalarNode && node.ShortTag() == "!!str" {
		*m = Mount{Source: node.Value}
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return nodeErr(node, "a mount is a path or {source: PATH, target: PATH, writable: BOOL}")
	}
	var out Mount
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := resolveAlias(node.Content[i]), resolveAlias(node.Content[i+1])
		if seen[k.Value] {
			return nodeErr(k, "mount has the key %q twice", k.Value)
		}
		seen[k.Value] = true
		switch k.Value {
		case "source", "target":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
				return nodeErr(v, "mount %s must be a path", k.Value)
			}
			if k.Value == "source" {
				out.Source = v.Value
			} else {
				out.Target = v.Value
			}
		case "writable":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return nodeErr(v, "mount writable must be true or false")
			}
			out.Writable, _ = strconv.ParseBool(v.Value)
		default:
			return nodeErr(k, "unknown key %q in a mount (known keys: source, target, writable)", k.Value)
		}
	}
	*m = out
	return nil
}

// Dest is where the agent sees the mount.
func (m Mount) Dest() string {
	if m.Target == "" {
		return m.Source
	}
	return m.Target
}

// reservedTargets are the sandbox's own directories: a mount may not land
// on or under them.
var reservedTargets = []string{"/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// checkMount says what is wrong with a mount, or "".
func checkMount(m Mount) string {
	for _, p := range []string{m.Source, m.Target} {
		if p != "" && (!filepath.IsAbs(p) || filepath.Clean(p) != p || strings.IndexByte(p, 0) >= 0) {
			return fmt.Sprintf("%q must be an absolute, clean path", p)
		}
	}
	if m.Source == "" {
		return "source must not be empty"
	}
	dest := m.Dest()
	if dest == "/" || dest == "/etc" || dest == "/tmp" {
		return fmt.Sprintf("target %s is the sandbox's own; mount below it", dest)
	}
	for _, r := range reservedTargets {
		if dest == r || strings.HasPrefix(dest, r+"/") {
			return fmt.Sprintf("target %s is under %s, which the sandbox provides", dest, r)
		}
	}
	return ""
}

// ByteSize is a size in bytes. In YAML it is an integer or a string with a
// binary unit: "512KiB", "64MiB", "2GiB", "1TiB".
type ByteSize uint64

// ParseByteSize parses an integer number of bytes, optionally with a
// binary unit (KiB, MiB, GiB, TiB, B).
func ParseByteSize(s string) (ByteSize, error) {
	v, err := protocol.ParseByteSize(s)
	return ByteSize(v), err
}

// UnmarshalYAML accepts an integer or a size string.
func (b *ByteSize) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	if node.Kind != yaml.ScalarNode || (node.ShortTag() != "!!int" && node.ShortTag() != "!!str") {
		return nodeErr(node, "want a size like 512MiB or 2GiB")
	}
	v, err := ParseByteSize(node.Value)
	if err != nil {
		return nodeErr(node, "%v", err)
	}
	*b = v
	return nil
}

// Unlimited is an rlimit value without a limit (RLIM_INFINITY).
const Unlimited = math.MaxUint64

// Rlimits are per-process resource limits by name: as, core, cpu, data,
// fsize, locks, memlock, msgqueue, nice, nofile, nproc, rtprio, rttime,
// sigpending, stack (see getrlimit(2)). Each sets both the soft and the
// hard limit. In YAML a value is an integer, a size ("1GiB") or "unlimited".
type Rlimits map[string]RlimitValue

// RlimitValue is one limit; Unlimited means none.
type RlimitValue uint64

// RlimitNames are the names Rlimits accepts.
var RlimitNames = []string{"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rtprio", "rttime", "sigpending", "stack"}

// UnmarshalYAML accepts an integer, a size or "unlimited".
func (r *RlimitValue) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	if node.Kind == yaml.ScalarNode && node.Value == "unlimited" {
		*r = Unlimited
		return nil
	}
	var b ByteSize
	if err := b.UnmarshalYAML(node); err != nil {
		return nodeErr(node, "want an integer, a size like 1GiB, or unlimited")
	}
	*r = RlimitValue(b)
	return nil
}

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

// Limits bound a run's resources. Pids always holds (RLIMIT_NPROC, counted
// in the agent's own user namespace, so per run); Memory and CPUs need the
// node's delegated cgroup v2 (Config.CgroupParent), and a run whose
// profile sets them fails to start without one rather than run unbounded.
type Limits struct {
	// Pids caps the agent's processes and threads (default 1024).
	Pids int `yaml:"pids" json:"pids,omitempty"`
	// Memory caps the run's memory (cgroup memory.max).
	Memory ByteSize `yaml:"memory" json:"memory,omitempty"`
	// CPUs caps the run's CPU time in cores, e.g. 1.5 (cgroup cpu.max).
	CPUs float64 `yaml:"cpus" json:"cpus,omitempty"`
	// Tmp is the size of the sandbox's /tmp (default 1GiB); it is memory.
	Tmp ByteSize `yaml:"tmp" json:"tmp,omitempty"`
	// Disk bounds what the run writes in its workspace (default 4GiB): a
	// root worker gives each run a filesystem of this size.
	Disk ByteSize `yaml:"disk" json:"disk,omitempty"`
	// Rlimits are per-process limits.
	Rlimits Rlimits `yaml:"rlimits" json:"rlimits,omitempty"`
	// Output caps the bytes the agent may print on stdout (default
	// DefaultOutputLimit); past it the agent is killed and the run fails.
	Output ByteSize `yaml:"output" json:"output,omitempty"`
	// Outputs caps the bytes a run's capture stores (default
	// DefaultOutputsBytes), diff and files together; a sparse file counts
	// its whole size.
	Outputs ByteSize `yaml:"outputs" json:"outputs,omitempty"`
}

// DefaultOutputLimit is a profile's output limit when it sets none.
const DefaultOutputLimit ByteSize = 1 << 30

// Bounds of Limits.
const (
	maxPids = 1 << 22 // pid_max
	minTmp  = 1 << 20
	minDisk = 16 << 20 // the smallest useful ext4
	maxDisk = 16 << 40 // ext4 with 4KiB blocks
	// DefaultDiskBytes is limits.disk when a profile does not set it.
	DefaultDiskBytes = 4 << 30
	// minOutput leaves room for an agent's first lines.
	minOutput = 4 << 10
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
	if l.Tmp != 0 && l.Tmp < minTmp {
		errs = append(errs, fmt.Errorf("tmp: %d bytes is below 1MiB", l.Tmp))
	}
	if l.Disk != 0 && (l.Disk < minDisk || l.Disk > maxDisk) {
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

// Validate says what is wrong with the mount, if anything.
func (m Mount) Validate() error {
	if why := checkMount(m); why != "" {
		return errors.New(why)
	}
	return nil
}
