package journal

import (
	"os"
	"path/filepath"
)

// Dir is a run directory on a node: everything the runner and the worker
// keep about one run. Root opens its files only through Open (or
// OpenNoLinks), never following a symbolic link.
type Dir string

// The files of a run directory, by name.
const (
	JournalName = "journal.ndjson"
	StderrName  = "stderr.log"
	StateName   = "state.ndjson"
	SpecName    = "spec.json"
	LockName    = "runner.lock"
	PIDName     = "runner.pid"
	InputName   = "input"
	// AgentName is the directory holding what the agent reaches: its
	// WorkspaceName and HomeName (a root worker's: a filesystem of
	// limits.disk). Run directories made before it hold the workspace
	// itself, and no home.
	AgentName     = "agent"
	WorkspaceName = "workspace"
	HomeName      = "home"
	// CheckpointIndexName holds the index of a session's tree as its run
	// restored it, which the run's checkpoint builds on.
	CheckpointIndexName = "checkpoint.index"
	FinishedName        = "finished"
	// LostStoppedName is the note a worker leaves in the directory of a
	// run declared lost whose agent it found still running and stopped.
	LostStoppedName = "lost-stopped"
	// InputSocketName is the unix socket on which the runner of a run
	// with stdin "stream" takes input messages from the worker.
	InputSocketName = "input.sock"
	// ToolsSocketName is the unix socket on which the runner of a run
	// whose profile lists tools hands the agent's calls to the worker
	// and takes their answers.
	ToolsSocketName = "tools.sock"
)

// Journal is the append-only file of the agent's stdout, ended by the sentinel.
func (d Dir) Journal() string { return filepath.Join(string(d), JournalName) }

// Stderr is the sidecar file of the agent's stderr.
func (d Dir) Stderr() string { return filepath.Join(string(d), StderrName) }

// State is the runner's NDJSON diagnostics, one fsynced record per phase.
func (d Dir) State() string { return filepath.Join(string(d), StateName) }

// Spec is the runner's spec (0600: it holds the nonce and the environment).
func (d Dir) Spec() string { return filepath.Join(string(d), SpecName) }

// Lock is the file the runner holds an flock on for its whole life.
func (d Dir) Lock() string { return filepath.Join(string(d), LockName) }

// PID holds the runner-outer's pid, for signalling it.
func (d Dir) PID() string { return filepath.Join(string(d), PIDName) }

// Input is the agent's stdin content (0600).
func (d Dir) Input() string { return filepath.Join(string(d), InputName) }

// Agent is the directory of what the agent reaches, its workspace and
// its home: the only parts of the run directory it can reach, or write.
func (d Dir) Agent() string { return filepath.Join(string(d), AgentName) }

// Workspace is the agent's working directory (/workspace inside the
// sandbox). In a run directory made before AgentName, it is WorkspaceName
// at the top, which is where this looks first when the directory has no
// AgentName: a run in flight across an upgrade keeps its workspace.
func (d Dir) Workspace() string {
	if d.legacy() {
		return filepath.Join(string(d), WorkspaceName)
	}
	return filepath.Join(d.Agent(), WorkspaceName)
}

// Home is the agent's home directory (HOME, /home/agent inside the
// sandbox), which a session's checkpoint keeps with the workspace.
func (d Dir) Home() string { return filepath.Join(d.Agent(), HomeName) }

// legacy reports whether d was made before AgentName: it has a workspace
// at its top and no agent directory.
func (d Dir) legacy() bool {
	if _, err := os.Lstat(d.Agent()); err == nil {
		return false
	}
	_, err := os.Lstat(filepath.Join(string(d), WorkspaceName))
	return err == nil
}

// CheckpointIndex is the index of a session's tree (CheckpointIndexName).
func (d Dir) CheckpointIndex() string { return filepath.Join(string(d), CheckpointIndexName) }

// Finished marks a run whose terminal status is published and recorded, so
// recovery scans skip it without asking NATS.
func (d Dir) Finished() string { return filepath.Join(string(d), FinishedName) }

// LostStopped is the note of an agent stopped after its run was declared
// lost (LostStoppedName).
func (d Dir) LostStopped() string { return filepath.Join(string(d), LostStoppedName) }
