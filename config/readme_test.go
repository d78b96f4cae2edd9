package config_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/batonhq/baton/config"
)

// TestReadmeConfigParses keeps the README's configuration example true.
func TestReadmeConfigParses(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Configuration.*?```yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README has no yaml block under ## Configuration")
	}
	cfg, err := config.Parse(m[1])
	if err != nil {
		t.Fatalf("README's configuration does not parse: %v", err)
	}
	if _, ok := cfg.Profiles["claude"]; !ok {
		t.Fatal("README's claude profile is missing")
	}
}
