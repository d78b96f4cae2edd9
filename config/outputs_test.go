package config_test

import (
	"errors"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

func TestOutputsProfileAndJobLimit(t *testing.T) {
	c, err := config.Parse([]byte(`
outputsMaxAge: 48h
profiles:
  p:
    command: [x]
    outputs: {diff: true, files: ["out/**", "*.md"]}
    limits: {outputs: 10MiB}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.OutputsTTL().Hours() != 48 || config.Default().OutputsTTL() != config.DefaultOutputsMaxAge {
		t.Fatalf("outputs TTL %v", c.OutputsTTL())
	}
	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "p"}, "/bin/baton")
	if err != nil || !inv.Outputs.Diff || len(inv.Outputs.Files) != 2 || int64(inv.Limits.Outputs) != 10<<20 {
		t.Fatalf("invocation %+v, %v", inv, err)
	}
	// A job may lower the limit, never raise it.
	inv, err = c.Resolve(protocol.Job{RunID: "r", Profile: "p", Limits: map[string]string{"outputs": "1MiB"}}, "/bin/baton")
	if err != nil || int64(inv.Limits.Outputs) != 1<<20 {
		t.Fatalf("lowered: %+v, %v", inv.Limits, err)
	}
	if _, err := c.Resolve(protocol.Job{RunID: "r", Profile: "p", Limits: map[string]string{"outputs": "11MiB"}}, "/bin/baton"); !errors.Is(err, protocol.ErrNotAllowed) {
		t.Fatalf("raised: %v", err)
	}
	for _, bad := range []string{
		"profiles: {p: {command: [x], outputs: {files: [\"../x\"]}}}",
		"profiles: {p: {command: [x], outputs: {files: [\"/abs\"]}}}",
		"profiles: {p: {command: [x], outputs: {diff: yes please}}}",
		"profiles: {p: {command: [x], outputs: {tar: true}}}",
		"outputsMaxAge: 1s\nprofiles: {p: {command: [x]}}",
	} {
		if _, err := config.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// A job may narrow what its profile captures, never widen it.
func TestOutputsJobNarrows(t *testing.T) {
	c, err := config.Parse([]byte("profiles:\n  p: {command: [x], outputs: {diff: true, files: [\"out/**\"]}}\n  bare: {command: [x]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "p", Outputs: &protocol.JobOutputs{Diff: &no, Files: []string{"out/*.md"}}}, "/b")
	if err != nil || inv.Outputs.Diff || len(inv.Outputs.Files) != 1 || len(inv.Outputs.Within) != 1 {
		t.Fatalf("narrowed: %+v, %v", inv.Outputs, err)
	}
	for _, tc := range []struct {
		profile string
		o       protocol.JobOutputs
		want    error
	}{
		{"bare", protocol.JobOutputs{Diff: &yes}, protocol.ErrNotAllowed},
		{"bare", protocol.JobOutputs{Files: []string{"**"}}, protocol.ErrNotAllowed},
		{"p", protocol.JobOutputs{Files: []string{"../x"}}, protocol.ErrInvalidJob},
	} {
		if _, err := c.Resolve(protocol.Job{RunID: "r", Profile: tc.profile, Outputs: &tc.o}, "/b"); !errors.Is(err, tc.want) {
			t.Errorf("%s %+v: %v, want %v", tc.profile, tc.o, err, tc.want)
		}
	}
}
