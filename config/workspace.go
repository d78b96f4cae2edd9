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
	// workspaces stream's max age.
	DefaultWorkspacesMaxAge = 7 * 24 * time.Hour
	// DefaultWorkspacesMaxBytes is workspacesMaxBytes when not set: twice
	// the largest archive, and with the jobs and DLQ streams' defaults 4
	// GiB reserved, which fits a small tenant (deploy/nats-tenants.conf).
	DefaultWorkspacesMaxBytes ByteSize = 2 << 30
)

// WorkspacesStreamMaxBytes bounds the workspaces stream: WorkspacesMaxBytes,
// or DefaultWorkspacesMaxBytes when that is not set.
func (c *Config) WorkspacesStreamMaxBytes() int64 {
	if c.WorkspacesMaxBytes > 0 {
		return int64(c.WorkspacesMaxBytes)
	}
	return int64(DefaultWorkspacesMaxBytes)
}

// WorkspacesTTL is the workspaces stream's max age: WorkspacesMaxAge, or
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
