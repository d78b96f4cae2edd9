package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Bounds Validate enforces.
const (
	maxConcurrency = 10000
	maxReplicas    = 5 // JetStream's limit
	minLeaseTTL    = time.Second
	minEventsAge   = time.Minute
	minRetention   = time.Minute
	minJobBytes    = 1 << 10
	maxJobBytes    = 64 << 20  // NATS's largest max_payload
	maxID          = 1<<32 - 2 // the largest id a user namespace maps
)

// MaxPool bounds a profile's pool: each sandbox in it is two waiting
// processes.
const MaxPool = 64

// PoolAuto is the pool of a profile whose file leaves "pool" out: each
// worker keeps one of its sandboxes started while the profile has been
// used in the last minutes, two under bursts, none once it is idle (the
// worker's adaptive pool), so that pooled starts need no tuning.
const PoolAuto = -1

// Validate reports every problem of c, joined; each starts with the path of
// its key, e.g. `profiles.claude.command: must not be empty`.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}

	if _, err := protocol.NewNames(c.Prefix); err != nil || c.Prefix == "" {
		bad("prefix", "%q must match [A-Za-z0-9_-]{1,64}", c.Prefix)
	}
	if c.LeaseTTL < minLeaseTTL {
		bad("leaseTTL", "%s is too short; it must be at least %s", c.LeaseTTL, minLeaseTTL)
	}
	c.Tenancy.validate(bad)
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		bad("concurrency", "%d is out of range 1..%d", c.Concurrency, maxConcurrency)
	}
	if c.Replicas < 1 || c.Replicas > maxReplicas {
		bad("replicas", "%d is out of range 1..%d", c.Replicas, maxReplicas)
	}
	if c.EventsMaxAge < minEventsAge {
		bad("eventsMaxAge", "%s is too short; it must be at least %s", c.EventsMaxAge, minEventsAge)
	}
	for _, l := range []struct {
		key string
		n   uint64
	}{{"eventsMaxBytes", uint64(c.EventsMaxBytes)}, {"jobsMaxBytes", uint64(c.JobsMaxBytes)}, {"dlqMaxBytes", uint64(c.DLQMaxBytes)},
		{"jobsMaxMsgs", uint64(c.JobsMaxMsgs)}, {"dlqMaxMsgs", uint64(c.DLQMaxMsgs)}} {
		if l.n > math.MaxInt64 { // a negative count too
			bad(l.key, "%d is out of range (0 for no bound)", int64(l.n))
		}
	}
	if c.OutputsMaxAge != 0 && c.OutputsMaxAge < minOutputsAge {
		bad("outputsMaxAge", "%s is too short; it must be at least %s", c.OutputsMaxAge, minOutputsAge)
	}
	if c.WorkspacesMaxAge != 0 && c.WorkspacesMaxAge < minOutputsAge {
		bad("workspacesMaxAge", "%s is too short; it must be at least %s", c.WorkspacesMaxAge, minOutputsAge)
	}
	if c.MaxWorkspaceBytes > math.MaxInt64 {
		bad("maxWorkspaceBytes", "%d is out of range", uint64(c.MaxWorkspaceBytes))
	}
	if c.WorkspacesMaxBytes > math.MaxInt64 {
		bad("workspacesMaxBytes", "%d is out of range", uint64(c.WorkspacesMaxBytes))
	} else if c.MaxWorkspaceBytes <= math.MaxInt64 && c.WorkspacesStreamMaxBytes() < c.WorkspaceLimits().MaxBytes {
		bad("workspacesMaxBytes", "%d is less than maxWorkspaceBytes (%d): the largest archive could not be uploaded", c.WorkspacesStreamMaxBytes(), c.WorkspaceLimits().MaxBytes)
	}
	if c.MaxWorkspaceEntries < 0 {
		bad("maxWorkspaceEntries", "%d is out of range (0 for the default, %d)", c.MaxWorkspaceEntries, DefaultMaxWorkspaceEntries)
	}
	if c.RunRetention < minRetention {
		bad("runRetention", "%s is too short; it must be at least %s", c.RunRetention, minRetention)
	}
	if c.RecordRetention != 0 && c.RecordRetention < minEventsAge {
		bad("recordRetention", "%s is too short; it must be at least %s", c.RecordRetention, minEventsAge)
	}
	if c.MaxJobBytes < minJobBytes || c.MaxJobBytes > maxJobBytes {
		bad("maxJobBytes", "%d is out of range %d..%d", c.MaxJobBytes, minJobBytes, maxJobBytes)
	}
	if c.DiskReserve > math.MaxInt64 {
		bad("diskReserve", "%d is out of range", uint64(c.DiskReserve))
	}
	if c.MaxInputBytes < 1 || c.MaxInputBytes > MaxInputBytesLimit {
		bad("maxInputBytes", "%d is out of range 1..%d", c.MaxInputBytes, MaxInputBytesLimit)
	}
	if c.CgroupParent != "" && (!filepath.IsAbs(c.CgroupParent) || filepath.Clean(c.CgroupParent) != c.CgroupParent) {
		bad("cgroupParent", "%q must be an absolute, clean path (a cgroup v2 directory)", c.CgroupParent)
	}
	switch {
	case c.SandboxUID == 0:
		bad("sandboxUID", "0 would run agents as root; use an unprivileged uid such as %d", DefaultSandboxUID)
	case c.SandboxUID < 0 || c.SandboxUID > maxID:
		bad("sandboxUID", "%d is not a uid", c.SandboxUID)
	}

	if len(c.Profiles) == 0 {
		bad("profiles", "none defined")
	}
	names := profileNames(c.Profiles)
	for _, name := range names {
		p := c.Profiles[name]
		at := "profiles." + name
		if !protocol.ValidProfileName(name) {
			at = fmt.Sprintf("profiles[%q]", name)
			bad(at, "the name must match [A-Za-z0-9_.-]{1,64}")
		}
		if len(p.Command) == 0 {
			bad(at+".command", "must not be empty")
		}
		for i, a := range p.Command {
			switch {
			case i == 0 && a == "":
				bad(at+".command[0]", "the program must not be empty")
			case strings.IndexByte(a, 0) >= 0:
				bad(fmt.Sprintf("%s.command[%d]", at, i), "must not contain NUL bytes")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			if !protocol.ValidEnvKey(k) {
				bad(at+".env", "key %q must match [A-Za-z_][A-Za-z0-9_]{0,127}", k)
			} else if strings.IndexByte(p.Env[k], 0) >= 0 {
				bad(at+".env."+k, "must not contain NUL bytes")
			}
		}
		for i, k := range p.AllowEnv {
			if !protocol.ValidEnvKey(k) {
				bad(fmt.Sprintf("%s.allowEnv[%d]", at, i), "%q must match [A-Za-z_][A-Za-z0-9_]{0,127}", k)
			}
		}
		if err := p.AllowArgs.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.allowArgs%w", at, e))
			}
		}
		if p.MaxConcurrent < 0 {
			bad(at+".maxConcurrent", "%d must not be negative", p.MaxConcurrent)
		}
		if p.Pool != PoolAuto && (p.Pool < 0 || p.Pool > MaxPool) {
			bad(at+".pool", "%d must be between 0 and %d", p.Pool, MaxPool)
		} else if p.Pool > 0 && len(runspec.Network(p.Network).Prefixes()) > 0 {
			bad(at+".pool", "a network with CIDR entries is set up per run, after the sandbox: no pool")
		}
		if p.Timeout < 0 {
			bad(at+".timeout", "%s must not be negative", p.Timeout)
		}
		if err := p.Network.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.network.%w", at, e))
			}
		}
		errs = append(errs, p.validateSecrets(at)...)
		for i, m := range p.Mounts {
			if err := m.Validate(); err != nil {
				bad(fmt.Sprintf("%s.mounts[%d]", at, i), "%v", err)
			}
		}
		if err := p.Outputs.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.outputs.%w", at, e))
			}
		}
		if err := p.validateTools(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.%w", at, e))
			}
		}
		if err := p.validateSession(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.%w", at, e))
			}
		}
		if err := p.Limits.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.limits.%w", at, e))
			}
		}
		if !p.Stdin.Valid() {
			bad(at+".stdin", "%q must be %s or %s", p.Stdin, StdinOnce, StdinStream)
		}
		if err := p.Interrupt.validate(p.Stdin.OrDefault()); err != nil {
			bad(at+".interrupt", "%v", err)
		}
		switch {
		case p.TurnEnd == nil:
		case p.TurnEnd.Field == "" || p.TurnEnd.Equals == "":
			bad(at+".turnEnd", "needs both field and equals, e.g. {field: type, equals: result}")
		case p.Stdin.OrDefault() != StdinStream:
			bad(at+".turnEnd", "needs stdin: stream (only then does the agent wait for input)")
		}
		if _, err := agui.ParseDialect(string(p.Events)); err != nil {
			bad(at+".events", "%v (or left out: told from the lines)", err)
		}
		if p.Nice < -20 || p.Nice > 19 {
			bad(at+".nice", "%d is not a nice value (-20 to 19)", p.Nice)
		}
		switch {
		case p.IdleTimeout < 0:
			bad(at+".idleTimeout", "%s must not be negative", p.IdleTimeout)
		case p.IdleTimeout > 0 && p.TurnEnd == nil:
			bad(at+".idleTimeout", "needs turnEnd (a run waits for input only between turns)")
		}
		errs = append(errs, p.validatePolicy(at)...)
		for _, id := range []struct {
			key string
			v   int
		}{{"agentUID", p.AgentUID}, {"agentGID", p.AgentGID}} {
			if id.v < 0 || id.v > maxID {
				bad(at+"."+id.key, "%d is not an id", id.v)
			}
		}
	}
	return errors.Join(errs...)
}

// validatePolicy reports the problems of the profile's policy and
// askTimeout; at is the profile's path.
func (p Profile) validatePolicy(at string) []error {
	var errs []error
	if p.Policy != nil {
		if err := p.Policy.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s.policy: %w", at, e))
			}
		}
		if p.Stdin.OrDefault() != StdinStream {
			errs = append(errs, fmt.Errorf("%s.policy: needs stdin: stream (baton answers the agent's permission prompts on its stdin)", at))
		}
	}
	switch {
	case p.AskTimeout < 0:
		errs = append(errs, fmt.Errorf("%s.askTimeout: %s must not be negative", at, p.AskTimeout))
	case p.AskTimeout > 0 && p.Policy == nil:
		errs = append(errs, fmt.Errorf("%s.askTimeout: needs policy (only a policy asks a person)", at))
	}
	return errs
}

// splitJoined undoes errors.Join, so each problem gets its key's path.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func profileNames(m map[string]Profile) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// InputHeaderRoom is what an input message's headers take beside its data
// when a worker stores it (previous sequence, end of input, kind, a
// client's dedupe id).
const InputHeaderRoom = 2 << 10

// FitMaxPayload lowers the limits of c that must fit in one NATS message
// to what a server whose max_payload is maxPayload carries, and returns a
// sentence for each it lowered (0 or less: unknown, nothing changes).
// Lowered, not refused: a job larger than max_payload can never reach the
// jobs stream, so the lower bound changes no outcome, and a default
// configuration keeps working against a server with a smaller
// max_payload. A job's DLQ entry needs no room of its own: the intake
// truncates one that does not fit beside its headers.
func (c *Config) FitMaxPayload(maxPayload int64) []string {
	if maxPayload <= 0 {
		return nil
	}
	var lowered []string
	if int64(c.MaxJobBytes) > maxPayload {
		lowered = append(lowered, fmt.Sprintf("maxJobBytes %d is over the server's max_payload %d: lowered to it (no larger job can be published)", c.MaxJobBytes, maxPayload))
		c.MaxJobBytes = int(maxPayload)
	}
	if most := maxPayload - InputHeaderRoom; int64(c.MaxInputBytes) > most {
		most = max(most, 1)
		lowered = append(lowered, fmt.Sprintf("maxInputBytes %d does not fit the server's max_payload %d beside its headers (%d bytes): lowered to %d", c.MaxInputBytes, maxPayload, InputHeaderRoom, most))
		c.MaxInputBytes = ByteSize(most)
	}
	return lowered
}
