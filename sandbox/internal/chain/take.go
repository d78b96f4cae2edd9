package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

// ErrNotPooled is returned for a spec whose sandbox is not the prestarted
// one's (another network, mounts, limits, uids, agent binary or HOME, or
// a run directory elsewhere): the run starts cold.
var ErrNotPooled = errors.New("sandbox: the spec does not fit the prestarted sandbox")

// MaxTakeLine bounds the take runner-outer writes on the control pipe
// (the agent's argv and environment): a spec with more starts cold.
const MaxTakeLine = 1 << 20

// AgentTake is what the sandbox's init learns at a take: the agent's
// command line and environment.
type AgentTake struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// Line is the control pipe's line for t: "take <json>\n".
func (t AgentTake) Line() []byte {
	return append(append([]byte(TakeWord+" "), MustJSON(t)...), '\n')
}

// TakeWord starts a take: on the pool socket, and on the control pipe.
const TakeWord = "take"

// ParseTake decodes a take line's payload, validated as a spec's.
func ParseTake(b []byte) (AgentTake, error) {
	var t AgentTake
	if err := runspec.DecodeStrict(b, &t); err != nil {
		return AgentTake{}, fmt.Errorf("%w: take: %w", runspec.ErrInvalidSpec, err)
	}
	if err := runspec.ValidateArgv(t.Argv); err != nil {
		return AgentTake{}, err
	}
	if err := runspec.ValidateEnv(t.Env); err != nil {
		return AgentTake{}, err
	}
	return t, nil
}

// AgentTakeOf is the take of s: its argv, and its environment with the
// proxy's variables when its network needs them.
func AgentTakeOf(s runspec.Spec) AgentTake {
	return AgentTake{Argv: s.Argv, Env: AgentSpecEnv(s)}
}

// AgentSpecEnv is the environment the agent of s is started with, before
// the runner's agentEnv sets its HOME and PWD: the spec's, the proxy's
// variables when its network needs them, with secrets CAEnv (the agent's
// TLS trusts the run's CA, whatever the profile set), and with tools
// MCPConfigEnv.
func AgentSpecEnv(s runspec.Spec) []string {
	env := s.Env
	if NetMode(s.Network) != NetNone {
		env = append(append([]string(nil), env...), ProxyEnv()...)
	}
	if len(s.Network.Secrets) > 0 {
		ca := CAEnv()
		env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
			return slices.ContainsFunc(ca, func(c string) bool { k, _, _ := strings.Cut(c, "="); return strings.HasPrefix(kv, k+"=") })
		})
		env = append(env, ca...)
	}
	if s.Tools != nil {
		env = append(append([]string(nil), env...), MCPConfigEnv+"=/etc/"+MCPConfigName)
	}
	return env
}

// Fits reports whether a run of spec can take a chain prestarted for
// pooled: same sandbox (what the chain built before the job: network,
// mounts, limits, uids, cgroup, the agent binary's bind and /etc's home)
// and same runs directory; only the job's own (run id, argv past its
// first word, environment but HOME, files, input, nonce, deadline, kill
// grace, stdin, interrupt, outputs, workspace archive) may differ.
func Fits(pooled, spec runspec.Spec) error {
	mismatch := func(what string) error { return fmt.Errorf("%w: %s differs", ErrNotPooled, what) }
	if filepath.Dir(pooled.RunDir) != filepath.Dir(spec.RunDir) {
		return mismatch("the runs directory")
	}
	if spec.Git != nil {
		return mismatch("the workspace's repository (a prestarted chain clones none)")
	}
	if len(spec.Argv) == 0 || pooled.Argv[0] != spec.Argv[0] || pooled.Baton != spec.Baton {
		return mismatch("the agent's binary")
	}
	ph, _ := EnvValue(pooled.Env, "HOME")
	sh, _ := EnvValue(spec.Env, "HOME")
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
	if n := len(AgentTakeOf(spec).Line()); n > MaxTakeLine {
		return fmt.Errorf("%w: argv and environment take %d bytes, more than a take's %d", ErrNotPooled, n, MaxTakeLine)
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
	_ = json.Unmarshal(MustJSON(v), &out)
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

// EnvValue is key's value in env (the last entry wins).
func EnvValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
