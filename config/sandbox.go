package config

import (
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Mount binds a host path into the sandbox. In YAML it is a path (bound
// read-only at the same path) or a mapping {source, target, writable}.
type Mount runspec.Mount

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
func (m Mount) Dest() string { return runspec.Mount(m).Dest() }

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
const Unlimited = runspec.Unlimited

// Rlimits are per-process resource limits by name: as, core, cpu, data,
// fsize, locks, memlock, msgqueue, nice, nofile, nproc, rtprio, rttime,
// sigpending, stack (see getrlimit(2)). Each sets both the soft and the
// hard limit. In YAML a value is an integer, a size ("1GiB") or "unlimited".
type Rlimits map[string]RlimitValue

// RlimitValue is one limit; Unlimited means none.
type RlimitValue uint64

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

// Limits bound a run's resources. Pids always holds (RLIMIT_NPROC, counted
// in the agent's own user namespace, so per run); Memory and CPUs need the
// node's delegated cgroup v2 (Config.CgroupParent), and a run whose
// profile sets them fails to start without one rather than run unbounded.
type Limits struct {
	// Pids caps the agent's processes and threads (default 1024).
	Pids int `yaml:"pids"`
	// Memory caps the run's memory (cgroup memory.max).
	Memory ByteSize `yaml:"memory"`
	// CPUs caps the run's CPU time in cores, e.g. 1.5 (cgroup cpu.max).
	CPUs float64 `yaml:"cpus"`
	// Tmp is the size of the sandbox's /tmp (default 1GiB); it is memory.
	Tmp ByteSize `yaml:"tmp"`
	// Disk bounds what the run writes in its workspace (default 4GiB): a
	// root worker gives each run a filesystem of this size.
	Disk ByteSize `yaml:"disk"`
	// Rlimits are per-process limits.
	Rlimits Rlimits `yaml:"rlimits"`
	// Output caps the bytes the agent may print on stdout (default
	// DefaultOutputLimit); past it the agent is killed and the run fails.
	Output ByteSize `yaml:"output"`
	// Outputs caps the bytes a run's capture stores (default
	// DefaultOutputsBytes), diff and files together; a sparse file counts
	// its whole size.
	Outputs ByteSize `yaml:"outputs"`
	// Stderr bounds the agent's stderr kept on the node (default 1MiB):
	// past it the oldest bytes go, behind a note; the status carries the
	// last 2 KiB.
	Stderr ByteSize `yaml:"stderr"`
}

// DefaultOutputLimit is a profile's output limit when it sets none.
const DefaultOutputLimit ByteSize = 1 << 30

// DefaultDiskBytes is limits.disk when a profile does not set it.
const DefaultDiskBytes = runspec.DefaultDiskBytes

// Validate reports every problem of the limits, each starting with its key.
func (l Limits) Validate() error { return l.Spec().Validate() }

// Spec is l as the runner spec carries it.
func (l Limits) Spec() runspec.Limits {
	var r runspec.Rlimits
	if l.Rlimits != nil {
		r = make(runspec.Rlimits, len(l.Rlimits))
		for n, v := range l.Rlimits {
			r[n] = runspec.RlimitValue(v)
		}
	}
	return runspec.Limits{Pids: l.Pids, Memory: uint64(l.Memory), CPUs: l.CPUs, Tmp: uint64(l.Tmp), Disk: uint64(l.Disk),
		Rlimits: r, Output: uint64(l.Output), Outputs: uint64(l.Outputs), Stderr: uint64(l.Stderr)}
}

// Validate says what is wrong with the mount, if anything.
func (m Mount) Validate() error { return runspec.Mount(m).Validate() }
