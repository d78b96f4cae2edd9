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
	for _, bad := range []string{"workspacesMaxAge: 1s", "maxWorkspaceEntries: -1", "maxWorkspaceBytes: lots"} {
		if _, err := config.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
