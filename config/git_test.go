package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// TestResolveGit: a job's repository is cloned only from a host the
// profile's allowlist names, with the profile's Basic secret for that host
// as its credential, over https.
func TestResolveGit(t *testing.T) {
	c, err := config.Parse([]byte(`
profiles:
  git:
    command: [/bin/sh, -c]
    network: {allow: [git.example.com, .corp.example, 10.1.0.0/16]}
    secrets:
      API_KEY: {value: k, hosts: [git.example.com], header: x-api-key}
      GIT_TOKEN: {value: t, hosts: [git.example.com], header: basic}
  offline:
    command: [/bin/sh, -c]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, profile, url string
		want               *runspec.Git
		err                error
		why                string
	}{
		{"secret", "git", "https://git.example.com/o/r.git", &runspec.Git{URL: "https://git.example.com/o/r.git", Depth: 1, Secret: "GIT_TOKEN"}, nil, ""},
		{"no secret for the host", "git", "https://src.corp.example/r", &runspec.Git{URL: "https://src.corp.example/r", Depth: 1}, nil, ""},
		{"http without a secret", "git", "http://src.corp.example/r", &runspec.Git{URL: "http://src.corp.example/r", Depth: 1}, nil, ""},
		{"an allowed address", "git", "https://10.1.2.3:8443/r", &runspec.Git{URL: "https://10.1.2.3:8443/r", Depth: 1}, nil, ""},
		{"http with a secret", "git", "http://git.example.com/r", nil, protocol.ErrNotAllowed, "over https only"},
		{"host not allowed", "git", "https://github.com/o/r", nil, protocol.ErrNotAllowed, `host "github.com" is not on profile "git"'s network.allow`},
		{"address not allowed", "git", "https://10.2.0.1/r", nil, protocol.ErrNotAllowed, "not on profile"},
		{"no network", "offline", "https://git.example.com/r", nil, protocol.ErrNotAllowed, "not on profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := protocol.Job{RunID: "r", Profile: tc.profile, Workspace: &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: tc.url}}}
			inv, err := c.Resolve(job, "/b")
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), tc.url) {
					t.Fatalf("%v, want %v saying %q and naming %s", err, tc.err, tc.why, tc.url)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *inv.Git != *tc.want {
				t.Fatalf("git %+v, want %+v", *inv.Git, *tc.want)
			}
		})
	}
}
