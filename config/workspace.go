package config

import (
	"time"

	"github.com/batonhq/baton/internal/unpack"
)

// Defaults of workspace archives (a job's workspace: {object: ...}).
const (
	// DefaultMaxWorkspaceBytes is maxWorkspaceBytes when not set: the
	// largest archive, as stored and as its files' total size.
	DefaultMaxWorkspaceBytes ByteSize = unpack.DefaultMaxBytes
	// DefaultMaxWorkspaceEntries is maxWorkspaceEntries when not set: as
	// many entries as a run's outputs capture lists.
	DefaultMaxWorkspaceEntries = unpack.DefaultMaxEntries
	// DefaultWorkspacesMaxAge is workspacesMaxAge when not set: the
	// workspaces bucket's TTL.
	DefaultWorkspacesMaxAge = 7 * 24 * time.Hour
)

// WorkspacesTTL is the workspaces bucket's TTL: WorkspacesMaxAge, or
// DefaultWorkspacesMaxAge when that is not set.
func (c *Config) WorkspacesTTL() time.Duration {
	if c.WorkspacesMaxAge > 0 {
		return c.WorkspacesMaxAge
	}
	return DefaultWorkspacesMaxAge
}

// WorkspaceLimits bound the extraction of one workspace archive.
func (c *Config) WorkspaceLimits() unpack.Limits {
	l := unpack.Limits{MaxBytes: int64(DefaultMaxWorkspaceBytes), MaxEntries: DefaultMaxWorkspaceEntries}
	if c.MaxWorkspaceBytes > 0 {
		l.MaxBytes = int64(c.MaxWorkspaceBytes)
	}
	if c.MaxWorkspaceEntries > 0 {
		l.MaxEntries = c.MaxWorkspaceEntries
	}
	return l
}
