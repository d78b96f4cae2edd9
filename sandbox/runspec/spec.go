package runspec

import (
	"time"
)

// WorkspaceArchive is an archive of the workspaces stream as a run was
// seeded from it.
type WorkspaceArchive struct {
	Object string `json:"object"`
	// Digest is the object's digest ("SHA-256=<base64url>") when the run
	// started; the archive is used only while it still has it.
	Digest string `json:"digest"`
	Size   uint64 `json:"size"`
}

// Spec is everything the runner chain needs to run one agent. The worker
// writes it to the run directory's spec file (0600) and every stage reads it
// from there.
type Spec struct {
	RunID string `json:"runId"`
	// RunDir is the run directory (see journal.Dir).
	RunDir string `json:"runDir"`
	// Argv is the agent's command line; Argv[0] is resolved on the PATH of Env.
	Argv []string `json:"argv"`
	// Baton is the baton binary a profile's "{baton}" stood for: when
	// Argv[0] is that file (outside the system directories), it is bound
	// into the sandbox read-only at its path. Empty: the runner's own
	// binary is.
	Baton string `json:"baton,omitempty"`
	// Env is the agent's whole environment, "KEY=value".
	Env []string `json:"env"`
	// Files are seed files written into the workspace before the agent starts.
	// Kept here, where the agent cannot write, they are the baseline the
	// workspace's diff is taken against when the run ends.
	Files map[string]string `json:"files,omitempty"`
	// HomeFiles are seed files written into the agent's home, after it is
	// seeded (the job's files under "~/").
	HomeFiles map[string]string `json:"homeFiles,omitempty"`
	// Workspace is the archive the workspace was seeded from before its
	// Files, pinned by its digest: the diff's baseline is that archive,
	// read again from the store when the run ends.
	Workspace *WorkspaceArchive `json:"workspace,omitempty"`
	// Git is the repository cloned into the (empty) workspace before the
	// agent starts; the diff's baseline is its commit the stages record
	// in state.ndjson (the phase GitClonePhase).
	Git *Git `json:"git,omitempty"`
	// Outputs is what the worker captures from the workspace at the end.
	Outputs Outputs `json:"outputs,omitzero"`
	// Nonce ends the journal's sentinel; the agent never sees it.
	Nonce string `json:"nonce"`
	// Deadline is when the runner stops the agent (SIGTERM, then SIGKILL
	// after KillGrace) and ends the journal with reason "timeout".
	Deadline  time.Time     `json:"deadline"`
	KillGrace time.Duration `json:"killGrace"`
	// Network is the agent's network policy.
	Network Network `json:"network"`
	// SandboxUID and SandboxGID are the host ids the agent runs as when
	// the runner starts as root.
	SandboxUID int `json:"sandboxUid"`
	SandboxGID int `json:"sandboxGid"`
	// AgentUID and AgentGID are the agent's ids inside the sandbox (0:
	// DefaultAgentUID, DefaultAgentGID).
	AgentUID int `json:"agentUid,omitempty"`
	AgentGID int `json:"agentGid,omitempty"`
	// Mounts are host paths bound into the sandbox, read-only unless
	// writable.
	Mounts []Mount `json:"mounts,omitempty"`
	// Limits bound the run's resources.
	Limits Limits `json:"limits"`
	// CgroupParent is the node's delegated cgroup v2 directory, under
	// which the run gets a cgroup for Limits.Memory, CPUs and Pids; empty
	// when there is none.
	CgroupParent string `json:"cgroupParent,omitempty"`
	// Stdin is how the agent's stdin pipe is fed: StdinOnce (also
	// when empty) or StdinStream.
	Stdin StdinMode `json:"stdin,omitempty"`
	// InterruptLine is written to stdin on an interrupt; empty: SIGINT
	// to the agent's process group.
	InterruptLine string `json:"interruptLine,omitempty"`
	// Tools are the host tools the agent may call (nil: none).
	Tools *Tools `json:"tools,omitempty"`
	// Nice is the run's CPU priority (-20 to 19): runner-outer sets it
	// for itself, so for everything it starts, and for its session's
	// scheduling autogroup.
	Nice int `json:"nice,omitempty"`
	// Pooled marks a prestarted chain's spec (Prestart): its runner
	// builds the sandbox and waits for a run to take it (Take), whose
	// spec then replaces this one.
	Pooled bool `json:"pooled,omitempty"`
}
