package config_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/batonhq/baton/config"
)

// TestReadmeConfigParses keeps the configuration example of
// docs/configuration.md (linked from the README) true.
func TestReadmeConfigParses(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Configuration.*?```yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/configuration.md has no yaml block under ## Configuration")
	}
	cfg, err := config.Parse(m[1])
	if err != nil {
		t.Fatalf("docs/configuration.md's configuration does not parse: %v", err)
	}
	if _, ok := cfg.Profiles["claude"]; !ok {
		t.Fatal("docs/configuration.md's claude profile is missing")
	}
	// So does its secrets example.
	m = regexp.MustCompile("(?s)## Secrets at the egress.*?```yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/configuration.md has no yaml block under ## Secrets at the egress")
	}
	if cfg, err = config.Parse(m[1]); err != nil {
		t.Fatalf("docs/configuration.md's secrets example does not parse: %v", err)
	}
	if len(cfg.Profiles["claude-keyless"].Secrets) != 3 {
		t.Fatal("docs/configuration.md's secrets example lost its secrets")
	}
	// And its policy example.
	m = regexp.MustCompile("(?s)## Policy and approvals.*?```yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/configuration.md has no yaml block under ## Policy and approvals")
	}
	if cfg, err = config.Parse(m[1]); err != nil {
		t.Fatalf("docs/configuration.md's policy example does not parse: %v", err)
	}
	if cfg.Profiles["claude-chat"].Policy == nil || cfg.Profiles["codex-chat"].Policy == nil {
		t.Fatal("docs/configuration.md's policy example lost its policies")
	}
}
