package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

var (
	// ErrNotPooled is returned by Take for a spec whose sandbox is not
	// the prestarted one's (another network, mounts, limits, uids, agent
	// binary or HOME, or a run directory elsewhere): the entry is left as
	// it was, and the run starts cold.
	ErrNotPooled = errors.New("sandbox: the spec does not fit the prestarted sandbox")
	// ErrPoolEntryGone is returned by Take when the prestarted chain
	// ended before its take (its sandbox failed, or it was killed): the
	// entry is closed, nothing of the run was written, and the run starts
	// cold.
	ErrPoolEntryGone = errors.New("sandbox: the prestarted chain has ended")
)

// PoolEntryPrefix starts the name of a prestarted chain's directory in
// the runs directory. No run id has a dot, so no run's directory is one,
// and scans of run directories pass them by.
const PoolEntryPrefix = ".pool-"

// IsPoolEntry reports whether name (a runs directory's entry) is a
// prestarted chain's directory.
func IsPoolEntry(name string) bool { return strings.HasPrefix(name, PoolEntryPrefix) }

// maxTakeLine bounds the take runner-outer writes on the control pipe
// (the agent's argv and environment): a spec with more starts cold.
const maxTakeLine = 1 << 20

// agentTake is what the sandbox's init learns at a take: the agent's
// command line and environment.
type agentTake struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// takeLine is the control pipe's line for t: "take <json>\n".
func (t agentTake) line() []byte {
	return append(append([]byte(takeWord+" "), mustJSON(t)...), '\n')
}

const takeWord = "take"

// parseTake decodes a take line's payload, validated as a spec's.
func parseTake(b []byte) (agentTake, error) {
	var t agentTake
	if err := runspec.DecodeStrict(b, &t); err != nil {
		return agentTake{}, fmt.Errorf("%w: take: %w", ErrInvalidSpec, err)
	}
	if err := runspec.ValidateArgv(t.Argv); err != nil {
		return agentTake{}, err
	}
	if err := runspec.ValidateEnv(t.Env); err != nil {
		return agentTake{}, err
	}
	return t, nil
}

// agentTakeOf is the take of s: its argv, and its environment with the
// proxy's variables when its network needs them.
func agentTakeOf(s Spec) agentTake {
	return agentTake{Argv: s.Argv, Env: agentSpecEnv(s)}
}

// agentSpecEnv is the environment the agent of s is started with, before
// agentEnv sets its HOME and PWD.
func agentSpecEnv(s Spec) []string {
	if netMode(s.Network) == netNone {
		return s.Env
	}
	return append(append([]string(nil), s.Env...), proxyEnv()...)
}

// Poolable reports why a chain for s cannot be started ahead of its job,
// or nil if it can: a network with CIDR entries is set up per run (pasta
// and nft), after the sandbox exists.
func Poolable(s Spec) error {
	if netMode(s.Network) == netPasta {
		return fmt.Errorf("%w: a network with CIDR entries is set up per run", ErrNotPooled)
	}
	return nil
}

// fits reports whether a run of spec can take a chain prestarted for
// pooled: same sandbox (what the chain built before the job: network,
// mounts, limits, uids, cgroup, the agent binary's bind and /etc's home)
// and same runs directory; only the job's own (run id, argv past its
// first word, environment but HOME, files, input, nonce, deadline, kill
// grace, stdin, interrupt, outputs, workspace archive) may differ.
func fits(pooled, spec Spec) error {
	mismatch := func(what string) error { return fmt.Errorf("%w: %s differs", ErrNotPooled, what) }
	if filepath.Dir(pooled.RunDir) != filepath.Dir(spec.RunDir) {
		return mismatch("the runs directory")
	}
	if len(spec.Argv) == 0 || pooled.Argv[0] != spec.Argv[0] || pooled.Baton != spec.Baton {
		return mismatch("the agent's binary")
	}
	ph, _ := envValue(pooled.Env, "HOME")
	sh, _ := envValue(spec.Env, "HOME")
	if ph != sh {
		return mismatch("HOME")
	}
	for _, c := range []struct {
		what string
		a, b any
	}{
		{"the network", pooled.Network, spec.Network},
		{"the mounts", pooled.Mounts, spec.Mounts},
		{"the limits", sandboxLimits(pooled.Limits), sandboxLimits(spec.Limits)},
		{"the cgroup parent", pooled.CgroupParent, spec.CgroupParent},
		{"the sandbox ids", [2]int{pooled.SandboxUID, pooled.SandboxGID}, [2]int{spec.SandboxUID, spec.SandboxGID}},
		{"the agent's ids", [2]int{pooled.AgentUID, pooled.AgentGID}, [2]int{spec.AgentUID, spec.AgentGID}},
	} {
		if !reflect.DeepEqual(normalJSON(c.a), normalJSON(c.b)) {
			return mismatch(c.what)
		}
	}
	if n := len(agentTakeOf(spec).line()); n > maxTakeLine {
		return fmt.Errorf("%w: argv and environment take %d bytes, more than a take's %d", ErrNotPooled, n, maxTakeLine)
	}
	return nil
}

// sandboxLimits are l without the limits runner-outer and the worker
// apply after the take (the journal's output, the outputs' capture).
func sandboxLimits(l runspec.Limits) runspec.Limits {
	l.Output, l.Outputs = 0, 0
	return l
}

// normalJSON is v as its JSON decodes to: nil and empty collections, which
// specs written and read back do not tell apart, compare equal.
func normalJSON(v any) any {
	var out any
	_ = json.Unmarshal(mustJSON(v), &out)
	switch o := out.(type) {
	case []any:
		if len(o) == 0 {
			return nil
		}
	case map[string]any:
		if len(o) == 0 {
			return nil
		}
	}
	return out
}
