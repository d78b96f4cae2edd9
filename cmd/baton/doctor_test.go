package main

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/sandbox"
)

// TestDoctorProfileChecks: doctor names each profile whose command the
// sandbox cannot find (warn), and fails when no profile can run.
func TestDoctorProfileChecks(t *testing.T) {
	cfg := &config.Config{Profiles: map[string]config.Profile{
		"bad": {Command: []string{"nonexistent-agent"}},
		"ok":  {Command: []string{"sh", "-c", "true"}},
	}}
	checks := profileChecks(cfg, "/bin/sh")
	if len(checks) != 2 || checks[0].Name != "profile bad" || checks[0].Severity != sandbox.SevWarn ||
		!strings.Contains(checks[0].Detail, `"nonexistent-agent"`) || checks[1].Severity != sandbox.SevOK {
		t.Fatalf("checks %+v", checks)
	}
	delete(cfg.Profiles, "ok")
	if checks := profileChecks(cfg, "/bin/sh"); len(checks) != 1 || checks[0].Severity != sandbox.SevFail || !sandbox.Failed(checks) {
		t.Fatalf("no profile can run: checks %+v, want FAIL", checks)
	}
}
