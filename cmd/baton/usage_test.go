package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

func TestSumUsage(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	u := func(cpu float64, rss int64, cost float64) *protocol.Usage {
		return &protocol.Usage{CPUSeconds: cpu, MaxRSSBytes: rss, Lines: 10, Agent: protocol.AgentUsage{OutputTokens: 100, CostUSD: cost}}
	}
	runs := []kv.RunRecord{
		{RunID: "a1", State: "succeeded", Profile: "claude", Labels: map[string]string{"tenant": "acme"}, Job: []byte(`{"concurrencyKey":"acme"}`), FinishedAt: now.Add(-time.Hour), Usage: u(2, 5, 0.5)},
		{RunID: "a2", State: "failed", Profile: "claude", Labels: map[string]string{"tenant": "acme"}, FinishedAt: now.Add(-2 * time.Hour), Usage: u(1, 9, 0.25)},
		{RunID: "b1", State: "succeeded", Profile: "codex", Labels: map[string]string{"tenant": "bolt"}, Job: []byte(`{"concurrencyKey":"bolt"}`), FinishedAt: now.Add(-30 * time.Hour), Usage: u(10, 1, 1)},
		// Not counted: under way, or ended without a usage (a lost run).
		{RunID: "r1", State: kv.RunRunning, Profile: "claude"},
		{RunID: "l1", State: "lost", Profile: "claude", FinishedAt: now},
	}
	sum := func(by string, since time.Duration) string {
		g, err := parseGrouping(by)
		if err != nil {
			t.Fatal(err)
		}
		var from time.Time
		if since > 0 {
			from = now.Add(-since)
		}
		var parts []string
		for _, r := range sumUsage(runs, g, from) {
			parts = append(parts, fmt.Sprintf("%s:%d/%g/%d/%d/%g", r.Group, r.Runs, r.Usage.CPUSeconds, r.Usage.MaxRSSBytes, r.Usage.Lines, r.Usage.Agent.CostUSD))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		by    string
		since time.Duration
		want  string
	}{
		// Largest CPU first; peak memory is the largest, not a sum.
		{"profile", 0, "codex:1/10/1/10/1 claude:2/3/9/20/0.75"},
		{"profile", 24 * time.Hour, "claude:2/3/9/20/0.75"},
		{"label:tenant", 0, "bolt:1/10/1/10/1 acme:2/3/9/20/0.75"},
		{"key", 0, "bolt:1/10/1/10/1 acme:1/2/5/10/0.5 :1/1/9/10/0.25"},
		{"run", 90 * time.Minute, "a1:1/2/5/10/0.5"},
	} {
		if got := sum(tc.by, tc.since); got != tc.want {
			t.Errorf("--by %s --since %v: %s, want %s", tc.by, tc.since, got, tc.want)
		}
	}
	for _, bad := range []string{"", "tenant", "label:", "Profile"} {
		if _, err := parseGrouping(bad); !errors.Is(err, errBadGrouping) {
			t.Errorf("--by %q: %v, want errBadGrouping", bad, err)
		}
	}
}

// TestCLIUsage: `baton usage` reads the records through the read relay and
// sums them, in a table and in JSON.
func TestCLIUsage(t *testing.T) {
	e := newCLIEnv(t)
	if out, _, err := e.run("", "usage"); err != nil || out != "no finished runs with usage\n" {
		t.Fatalf("baton usage with no runs: %v %q", err, out)
	}
	runs := kv.NewStore[kv.RunRecord](e.res.Runs)
	for _, r := range []kv.RunRecord{
		{RunID: "u-1", State: "succeeded", Profile: "claude", Usage: &protocol.Usage{CPUSeconds: 1.5, Lines: 3, Agent: protocol.AgentUsage{InputTokens: 7, CostUSD: 0.5}}},
		{RunID: "u-2", State: "failed", Profile: "claude", Usage: &protocol.Usage{CPUSeconds: 0.5, Lines: 4, Agent: protocol.AgentUsage{InputTokens: 3, CostUSD: 0.25}}},
	} {
		r.Node, r.FinishedAt = "n1", time.Now()
		if _, err := runs.Create(t.Context(), r.RunID, r); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := e.run("", "usage", "--since", "1h", "--json")
	if err != nil {
		t.Fatalf("baton usage --json: %v %s", err, errOut)
	}
	var rows []usageRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	want := usageRow{Group: "claude", Runs: 2, Usage: protocol.Usage{CPUSeconds: 2, Lines: 7, Agent: protocol.AgentUsage{InputTokens: 10, CostUSD: 0.75}}}
	if len(rows) != 1 || rows[0] != want {
		t.Errorf("baton usage --json: %+v, want [%+v]", rows, want)
	}
	if out, _, err := e.run("", "usage"); err != nil || !strings.Contains(out, "claude  2 ") || !strings.Contains(out, "10/0/0") {
		t.Errorf("baton usage: %v\n%s", err, out)
	}
}

// TestJobKeyPrefersTheRecords: a run keyed by its tenant label records
// the key; its job names none.
func TestJobKeyPrefersTheRecords(t *testing.T) {
	for _, tc := range []struct {
		rec  kv.RunRecord
		want string
	}{
		{kv.RunRecord{Key: "acme", Job: []byte(`{"labels":{"tenant":"acme"}}`)}, "acme"},
		{kv.RunRecord{Job: []byte(`{"concurrencyKey":"bolt"}`)}, "bolt"},
		{kv.RunRecord{}, ""},
	} {
		if got := jobKey(tc.rec); got != tc.want {
			t.Errorf("jobKey(%+v) = %q, want %q", tc.rec, got, tc.want)
		}
	}
}
