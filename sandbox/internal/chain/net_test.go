package chain

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestNetMode(t *testing.T) {
	for _, c := range []struct {
		allow []string
		want  string
	}{
		{nil, NetNone},
		{[]string{"api.example.com"}, NetProxy},
		{[]string{"api.example.com", ".example.org"}, NetProxy},
		{[]string{"api.example.com", "10.0.0.0/8"}, NetPasta},
		{[]string{"fd00::/8"}, NetPasta},
	} {
		if got := NetMode(runspec.Network{Allow: c.allow}); got != c.want {
			t.Errorf("NetMode(%q) = %s, want %s", c.allow, got, c.want)
		}
	}
}

func TestAgentSpecEnvNamesTheMCPConfig(t *testing.T) {
	s := runspec.Spec{Env: []string{"A=1"}}
	if got := strings.Join(AgentSpecEnv(s), " "); got != "A=1" {
		t.Errorf("without tools: %s", got)
	}
	s.Tools = &runspec.Tools{Names: []string{"deploy"}}
	if got := strings.Join(AgentSpecEnv(s), " "); got != "A=1 BATON_MCP_CONFIG=/etc/baton-mcp.json" {
		t.Errorf("with tools: %s", got)
	}
	if len(s.Env) != 1 {
		t.Errorf("the spec's environment changed: %v", s.Env)
	}
}
