package config

import (
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Config is the worker's configuration file.
type Config struct {
	// Prefix of every subject and resource name (default "baton").
	Prefix string `yaml:"prefix"`
	// LeaseTTL is the lease bucket's TTL (default 15s).
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// Concurrency is how many runs one worker holds at once (default 4).
	Concurrency int `yaml:"concurrency"`
	// Replicas of every stream and bucket (default 1; 3 for clusters).
	Replicas int `yaml:"replicas"`
	// EventsMaxAge bounds how long run events are kept (default 7 days).
	EventsMaxAge time.Duration `yaml:"eventsMaxAge"`
	// OutputsMaxAge is how long captured outputs are kept: the outputs
	// bucket's TTL (default 7 days; at least 1m).
	OutputsMaxAge time.Duration `yaml:"outputsMaxAge"`
	// WorkspacesMaxAge is how long uploaded workspace archives are kept:
	// the workspaces stream's max age (default 7 days; at least 1m).
	WorkspacesMaxAge time.Duration `yaml:"workspacesMaxAge"`
	// MaxWorkspaceBytes bounds a job's workspace archive, as stored and
	// as its files' total size (default 1 GiB); the run's disk limit
	// bounds it too.
	MaxWorkspaceBytes ByteSize `yaml:"maxWorkspaceBytes"`
	// MaxWorkspaceEntries bounds a workspace archive's entries (default
	// 200,000).
	MaxWorkspaceEntries int `yaml:"maxWorkspaceEntries"`
	// WorkspacesMaxBytes bounds all uploaded workspace archives together,
	// the workspaces stream's size (default 2 GiB; at least
	// maxWorkspaceBytes). It is reserved in the server's store, and a full
	// stream refuses new uploads: clients cannot take room the other
	// streams need.
	WorkspacesMaxBytes ByteSize `yaml:"workspacesMaxBytes"`
	// RunRetention is how long a finished run's directory (journal, stderr,
	// workspace) stays on its node before the worker removes it (default
	// 7 days).
	RunRetention time.Duration `yaml:"runRetention"`
	// RecordRetention is how long a finished run's record stays in the
	// runs bucket (default: EventsMaxAge). Records of live runs never
	// expire.
	RecordRetention time.Duration `yaml:"recordRetention"`
	// MaxJobBytes bounds a job's encoded size (default 1 MiB).
	MaxJobBytes int `yaml:"maxJobBytes"`
	// SandboxUID is the host uid a root worker runs sandboxes as (default 65534).
	SandboxUID int `yaml:"sandboxUID"`
	// CgroupParent is a delegated cgroup v2 directory under which each run
	// gets a cgroup of its own for the profiles' memory, pids and cpu
	// limits (default: none, so profiles that set memory or cpus cannot run).
	CgroupParent string `yaml:"cgroupParent"`
	// EventsMaxBytes bounds the events stream's size (0: no bound but
	// the server's store). A full stream refuses new events: publishing
	// waits for room (old runs' events aging out, or an operator freeing
	// space) and loses nothing, and older runs stay replayable.
	EventsMaxBytes ByteSize `yaml:"eventsMaxBytes"`
	// JobsMaxBytes and JobsMaxMsgs bound the jobs stream (default 1 GiB
	// and 100,000 jobs; 0: no bound): a full queue refuses new jobs, and
	// their publishers get the error.
	JobsMaxBytes ByteSize `yaml:"jobsMaxBytes"`
	JobsMaxMsgs  int64    `yaml:"jobsMaxMsgs"`
	// DLQMaxBytes and DLQMaxMsgs bound the dead-letter stream (default
	// 1 GiB and 100,000 entries; 0: no bound); a full DLQ drops its oldest
	// entries.
	DLQMaxBytes ByteSize `yaml:"dlqMaxBytes"`
	DLQMaxMsgs  int64    `yaml:"dlqMaxMsgs"`
	// MaxInputBytes bounds one input message sent to a running agent
	// (baton send; default 64 KiB, at most 256 KiB).
	MaxInputBytes ByteSize `yaml:"maxInputBytes"`
	// DiskBudget holds a new run in the jobs stream while the state
	// filesystem has less free space than what the node's running runs may
	// still write (their output, stderr and, for a root worker, workspace
	// image limits), the new run's limits and DiskReserve (default true).
	DiskBudget bool `yaml:"diskBudget"`
	// DiskReserve is the free space the budget always leaves on the state
	// filesystem (default 1 GiB): room for records, specs and the rest.
	DiskReserve ByteSize `yaml:"diskReserve"`
	// SessionsMaxAge is how long a session no run used is kept, with its
	// checkpoints (default 30 days).
	SessionsMaxAge time.Duration `yaml:"sessionsMaxAge"`
	// CheckpointsMaxBytes bounds the checkpoints bucket (default 2 GiB):
	// a full bucket fails new checkpoints, and their sessions keep their
	// previous heads.
	CheckpointsMaxBytes ByteSize `yaml:"checkpointsMaxBytes"`
	// Tenancy shares the cluster between concurrency keys: tenantLabel,
	// keyConcurrency and keyWeights, read again on SIGHUP.
	Tenancy `yaml:",inline"`
	// Profiles by name; the built-in "demo" profile is always present unless
	// the file defines its own.
	Profiles map[string]Profile `yaml:"profiles"`
}

// Profile turns a job into an agent invocation.
type Profile struct {
	// Command is the argv the agent starts with; job args go into it as
	// AllowArgs says. The token "{baton}" in any element stands for the
	// path of the running baton binary.
	Command []string `yaml:"command"`
	// Env is set for the agent as given.
	Env map[string]string `yaml:"env"`
	// AllowEnv lists the keys a job may set.
	AllowEnv []string `yaml:"allowEnv"`
	// AllowArgs says which args a job may add, and where (see ArgPolicy).
	AllowArgs ArgPolicy `yaml:"allowArgs"`
	// MaxConcurrent caps the runs of this profile one worker runs at once
	// (0: only the worker's concurrency); further jobs wait in the stream.
	MaxConcurrent int `yaml:"maxConcurrent"`
	// Pool is how many of this profile's sandboxes each worker keeps
	// started ahead of their jobs (0: none), up to MaxPool, or PoolAuto:
	// a job that changes nothing of the sandbox (network, mounts, limits
	// but output and outputs, HOME) takes one and skips the chain's start.
	// Each waits as an idle run does. Not with CIDR entries in
	// network.allow. A profile of a file that leaves the key out gets
	// PoolAuto; the zero value, in a Profile made in Go, is none.
	Pool int `yaml:"pool"`
	// Timeout is the longest a run may take (default 1h; zero means the
	// default). A job may only shorten it.
	Timeout time.Duration `yaml:"timeout"`
	// Network is the run's network policy.
	Network Network `yaml:"network"`
	// Secrets are credentials by name (the agent's environment variable,
	// which holds a placeholder): the egress proxy adds them to requests
	// to their hosts (see Secret).
	Secrets map[string]Secret `yaml:"secrets"`
	// UpstreamCA is a PEM file of CA certificates the egress proxy
	// trusts, beside the host's, when it connects to a secret's host (an
	// internal CA; a test server's).
	UpstreamCA string `yaml:"upstreamCA"`
	// Mounts are host paths bound into the sandbox, read-only unless
	// marked writable.
	Mounts []Mount `yaml:"mounts"`
	// Limits bound the run's resources.
	Limits Limits `yaml:"limits"`
	// Outputs is what is captured from the workspace when a run ends.
	Outputs Outputs `yaml:"outputs"`
	// AgentUID and AgentGID are the agent's ids inside the sandbox (0: the
	// default, 1000; the agent is never root inside).
	AgentUID int `yaml:"agentUID"`
	AgentGID int `yaml:"agentGID"`
	// Stdin is how the agent's stdin pipe is fed: StdinOnce (the
	// default) writes the job's input and closes it; StdinStream keeps it
	// open for input messages sent while the agent runs.
	Stdin StdinMode `yaml:"stdin"`
	// Interrupt is how `baton interrupt` stops the agent's current turn:
	// SIGINT to its process group (the default), or a line written to its
	// stdin (which needs stdin "stream").
	Interrupt Interrupt `yaml:"interrupt"`
	// TurnEnd says which agent line ends a turn (the agent then waits for
	// input): a JSON line whose top-level Field is the string Equals. The
	// run's status is then "waiting" until input is written ("running").
	TurnEnd *TurnEnd `yaml:"turnEnd"`
	// IdleTimeout ends a run that waits for input longer (status timeout,
	// reason idle); 0: no bound but the run's timeout. Needs turnEnd.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// Nice is the CPU priority of the profile's runs, -20 (highest) to
	// 19 (lowest), 0 by default: runner-outer takes it first thing, so
	// the whole chain and the agent run at it, and, where the kernel
	// groups tasks by session (sched_autogroup_enabled, tasks in the root
	// cpu cgroup), so does the run's group, which is what weighs against
	// other runs there. A batch profile at 10 leaves the CPU to
	// interactive runs (and to the worker and NATS) when agents load the
	// node. Below 0 needs CAP_SYS_NICE in the runner (a root worker).
	Nice int `yaml:"nice"`
	// Session is what the profile's session runs keep between runs
	// (nil: the defaults).
	Session *Session `yaml:"session"`
	// Setup are shell commands run in the sandbox, in order, before the
	// agent of a session's first run; their output goes on the run's
	// chain, and the session's first checkpoint is taken after them, so
	// later runs start from it without running them again.
	Setup []string `yaml:"setup"`
	// Events is the dialect of the agent's JSON lines, which the AG-UI
	// projection of its runs translates (package agui): claude,
	// codex-exec, codex-app-server or raw (translate nothing). Empty,
	// the projection tells it from the lines.
	Events agui.Dialect `yaml:"events"`
	// Tools are host tools the agent may call: each a NATS service
	// endpoint <prefix>.tools.<name>, reached through `baton mcp` in the
	// sandbox (docs/tools.md). ToolLimits bound the calls.
	Tools      []string   `yaml:"tools"`
	ToolLimits ToolLimits `yaml:"toolLimits"`
	// Policy decides the agent's permission prompts (Claude Code's
	// can_use_tool with --permission-prompt-tool stdio, Codex
	// app-server's requestApproval): baton answers an allow or a deny on
	// the agent's stdin (so it needs stdin: stream) and asks a person the
	// rest. A job's policy narrows it. Nil: prompts are passed through.
	Policy *policy.Policy `yaml:"policy"`
	// AskTimeout is how long a prompt waits for a person before baton
	// tells the agent it awaits approval (a denial it may retry after,
	// once a person allows it); default DefaultAskTimeout, below Claude
	// Code's own ~60 s wait. Needs policy.
	AskTimeout time.Duration `yaml:"askTimeout"`
}

// Network is "none" (loopback only) or an egress allowlist. In YAML it is
// the scalar `none` or a mapping
// `{allow: [api.example.com, .example.org, 10.20.0.0/16], hosts: {...}}`.
type Network runspec.Network

// RecordTTL is how long a finished run's record is kept: RecordRetention,
// or EventsMaxAge when that is not set.
func (c *Config) RecordTTL() time.Duration {
	if c.RecordRetention > 0 {
		return c.RecordRetention
	}
	return c.EventsMaxAge
}
