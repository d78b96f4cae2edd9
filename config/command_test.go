package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
)

func TestFindCommand(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"bin/agent": 0o755, "bin/notexec": 0o644, "self": 0o755} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(dir, "self")
	mounted := []config.Mount{{Source: dir, Target: "/opt/agent"}}
	onPath := map[string]string{"PATH": "/opt/agent/bin:/usr/bin:/bin"}
	for _, tc := range []struct {
		name    string
		profile config.Profile
		want    string // the host file, or what the error says
		found   bool
	}{
		{"system command", config.Profile{Command: []string{"sh", "-c", "true"}}, "/sh", true},
		{"missing", config.Profile{Command: []string{"nonexistent-agent"}}, `"nonexistent-agent" is in no directory of the sandbox's PATH (/usr/local/bin:/usr/bin:/bin)`, false},
		{"baton", config.Profile{Command: []string{"{baton}", "fake-agent"}}, self, true},
		{"mounted, absolute", config.Profile{Command: []string{"/opt/agent/bin/agent"}, Mounts: mounted}, filepath.Join(dir, "bin/agent"), true},
		{"mounted, on the PATH", config.Profile{Command: []string{"agent"}, Mounts: mounted, Env: onPath}, filepath.Join(dir, "bin/agent"), true},
		{"mounted at its own path", config.Profile{Command: []string{filepath.Join(dir, "bin/agent")}, Mounts: []config.Mount{{Source: dir}}}, filepath.Join(dir, "bin/agent"), true},
		{"mounted, not on the PATH", config.Profile{Command: []string{"agent"}, Mounts: mounted}, "in no directory of the sandbox's PATH", false},
		{"on the PATH, not mounted", config.Profile{Command: []string{"agent"}, Env: onPath}, "in no directory of the sandbox's PATH (/opt/agent/bin:/usr/bin:/bin)", false},
		{"not executable", config.Profile{Command: []string{"/opt/agent/bin/notexec"}, Mounts: mounted}, "is not executable", false},
		{"a directory", config.Profile{Command: []string{"/opt/agent/bin"}, Mounts: mounted}, "is a directory", false},
		{"outside the sandbox", config.Profile{Command: []string{filepath.Join(dir, "bin/agent")}}, "is outside the sandbox", false},
		{"a prefix is not a mount", config.Profile{Command: []string{"/opt/agentx/bin/agent"}, Mounts: mounted}, "is outside the sandbox", false},
		{"the workspace's", config.Profile{Command: []string{"./run.sh"}}, "./run.sh", true},
		{"none", config.Profile{}, "has no command", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.profile.FindCommand(self)
			switch {
			case tc.found && (err != nil || !strings.HasSuffix(got, tc.want)):
				t.Errorf("FindCommand = %q, %v; want %q", got, err, tc.want)
			case !tc.found && (!errors.Is(err, config.ErrNoCommand) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("FindCommand = %q, %v; want ErrNoCommand saying %q", got, err, tc.want)
			}
		})
	}
}
