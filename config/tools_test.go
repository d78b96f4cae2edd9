package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

func TestProfileTools(t *testing.T) {
	c, err := config.Parse([]byte(`profiles:
  p:
    command: [agent]
    tools: [deploy, create_pr]
    toolLimits: {calls: 5, timeout: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := c.Resolve(protocol.Job{RunID: "r1", Profile: "p"}, "/bin/baton")
	if err != nil {
		t.Fatal(err)
	}
	got := inv.Tools
	if got == nil || strings.Join(got.Names, ",") != "deploy,create_pr" || got.MaxCalls != 5 ||
		got.MaxBytes != config.DefaultToolBytes || got.Timeout != 2*time.Second {
		t.Fatalf("Tools = %+v", got)
	}
	c, _ = config.Parse([]byte("profiles:\n  p:\n    command: [agent]\n"))
	if inv, _ := c.Resolve(protocol.Job{RunID: "r1", Profile: "p"}, "/bin/baton"); inv.Tools != nil {
		t.Fatalf("a profile without tools has %+v", inv.Tools)
	}
}

func TestProfileToolsInvalid(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`tools: [deploy.prod]`, `profiles.p.tools[0]: "deploy.prod" must match`},
		{`tools: ["*"]`, `profiles.p.tools[0]: "*" must match`},
		{`tools: [""]`, `profiles.p.tools[0]: "" must match`},
		{`tools: [a, a]`, `profiles.p.tools[1]: "a" is listed twice`},
		{`toolLimits: {calls: -1}`, `profiles.p.toolLimits.calls: -1 must not be negative`},
		{`toolLimits: {bytes: 1MiB}`, `profiles.p.toolLimits.bytes: 1048576 is more than`},
		{`toolLimits: {timeout: 2h}`, `profiles.p.toolLimits.timeout: 2h0m0s must be between`},
		{"tools: [a]\n    pool: 1", `profiles.p.tools: a profile with tools has no pool`},
	} {
		_, err := config.Parse([]byte("profiles:\n  p:\n    command: [agent]\n    " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
