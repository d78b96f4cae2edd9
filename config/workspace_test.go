package config_test

import (
	"testing"

	"github.com/batonhq/baton/config"
)

func TestWorkspaceKeys(t *testing.T) {
	c, err := config.Parse([]byte("workspacesMaxAge: 48h\nmaxWorkspaceBytes: 2GiB\nmaxWorkspaceEntries: 5000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.WorkspaceLimits(); c.WorkspacesTTL().Hours() != 48 || l.MaxBytes != 2<<30 || l.MaxEntries != 5000 {
		t.Fatalf("TTL %v, limits %+v", c.WorkspacesTTL(), l)
	}
	d := config.Default()
	if l := d.WorkspaceLimits(); d.WorkspacesTTL() != config.DefaultWorkspacesMaxAge || l.MaxBytes != 1<<30 || l.MaxEntries != 200_000 {
		t.Fatalf("defaults: TTL %v, limits %+v", d.WorkspacesTTL(), l)
	}
	if c.WorkspacesStreamMaxBytes() != 2<<30 || d.WorkspacesStreamMaxBytes() != int64(config.DefaultWorkspacesMaxBytes) {
		t.Fatalf("workspacesMaxBytes %d, default %d", c.WorkspacesStreamMaxBytes(), d.WorkspacesStreamMaxBytes())
	}
	if c, err := config.Parse([]byte("workspacesMaxBytes: 8GiB\nmaxWorkspaceBytes: 4GiB\n")); err != nil || c.WorkspacesStreamMaxBytes() != 8<<30 {
		t.Fatalf("workspacesMaxBytes: 8GiB: %v", err)
	}
	// The stream must hold the largest archive.
	for _, bad := range []string{"workspacesMaxAge: 1s", "maxWorkspaceEntries: -1", "maxWorkspaceBytes: lots",
		"workspacesMaxBytes: 512MiB", "maxWorkspaceBytes: 3GiB", "workspacesMaxBytes: 9223372036854775808"} {
		if _, err := config.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
