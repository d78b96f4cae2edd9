package sandbox

import "github.com/batonhq/baton/sandbox/runspec"

// Spec is everything the runner chain needs to run one agent: the run
// directory's spec file, which the worker writes and every stage reads
// (package runspec has its fields and rules).
type Spec = runspec.Spec

// WorkspaceArchive is an archive of the workspaces stream as a run was
// seeded from it.
type WorkspaceArchive = runspec.WorkspaceArchive

// Defaults for a Spec's zero values (runspec has their reasons).
const (
	DefaultSandboxUID = runspec.DefaultSandboxUID
	DefaultSandboxGID = runspec.DefaultSandboxGID
	DefaultKillGrace  = runspec.DefaultKillGrace
	DefaultAgentUID   = runspec.DefaultAgentUID
	DefaultAgentGID   = runspec.DefaultAgentGID
)

// Defaults of Limits.
const (
	DefaultPids     = runspec.DefaultPids
	DefaultTmpBytes = runspec.DefaultTmpBytes
	// DefaultDiskBytes bounds a root worker's workspace (limits.disk).
	DefaultDiskBytes = runspec.DefaultDiskBytes
)

// ErrInvalidSpec wraps every reason Validate refuses a spec.
var ErrInvalidSpec = runspec.ErrInvalidSpec
