package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

func TestRunFilter(t *testing.T) {
	t0 := time.Now()
	runs := []kv.RunRecord{ // newest first, as client.Runs returns them
		{RunID: "a", State: "failed", Profile: "claude", CreatedAt: t0, Labels: map[string]string{"pr": "1", "team": "x"}},
		{RunID: "b", State: kv.RunRunning, Profile: "demo", CreatedAt: t0.Add(-time.Minute), Labels: map[string]string{"pr": "2"}},
		{RunID: "c", State: "succeeded", Profile: "claude", CreatedAt: t0.Add(-2 * time.Minute)},
		{RunID: "d", State: "timeout", Profile: "claude", CreatedAt: t0.Add(-3 * time.Minute), Labels: map[string]string{"pr": "1"}},
	}
	for _, tc := range []struct {
		f       runFilter
		want    string // the runIds kept, in order
		wantErr string
	}{
		{runFilter{}, "abcd", ""},
		{runFilter{states: []string{"failed", "timeout"}}, "ad", ""},
		{runFilter{states: []string{"running"}}, "b", ""},
		{runFilter{states: []string{"starting"}}, "", ""},
		{runFilter{profile: "claude"}, "acd", ""},
		{runFilter{profile: "nosuch"}, "", ""},
		{runFilter{labels: []string{"pr=1"}}, "ad", ""},
		{runFilter{labels: []string{"pr=1", "team=x"}}, "a", ""},
		{runFilter{labels: []string{"pr="}}, "", ""},
		{runFilter{limit: 2}, "ab", ""},
		{runFilter{limit: 9}, "abcd", ""},
		{runFilter{profile: "claude", limit: 2}, "ac", ""},
		{runFilter{states: []string{"failed", "succeeded", "timeout"}, profile: "claude", labels: []string{"pr=1"}, limit: 1}, "a", ""},
		{runFilter{states: []string{"Failed"}}, "", `--state "Failed": not a run state (starting, running, succeeded`},
		{runFilter{states: []string{"waiting"}}, "", "not a run state"},
		{runFilter{labels: []string{"pr"}}, "", "want KEY=VALUE"},
		{runFilter{labels: []string{"pr=1", "pr=2"}}, "", "pr given twice"},
		{runFilter{limit: -1}, "", "--limit -1"},
	} {
		got, err := tc.f.apply(runs)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: got %v, want an error with %q", tc.f, err, tc.wantErr)
			}
			continue
		}
		var ids string
		for _, r := range got {
			ids += r.RunID
		}
		if err != nil || ids != tc.want {
			t.Errorf("%+v: kept %q, %v; want %q", tc.f, ids, err, tc.want)
		}
	}
}

// TestCLIRunsListFilters lists a real server's records through the flags.
func TestCLIRunsListFilters(t *testing.T) {
	e := newCLIEnv(t)
	// Nothing to list is said, where a header stood alone.
	for args, want := range map[string]string{"runs": "no runs: the runs bucket holds no record\n", "dlq": "no rejected jobs: the dead-letter stream is empty\n"} {
		if out, _, err := e.run("", args); err != nil || out != want {
			t.Errorf("baton %s with nothing to list: %v %q, want %q", args, err, out, want)
		}
	}
	runs := kv.NewStore[kv.RunRecord](e.res.Runs)
	t0 := time.Now().Add(-time.Hour)
	for i, r := range []kv.RunRecord{
		{RunID: "f-1", State: "failed", Profile: "claude", Labels: map[string]string{"pr": "7"}},
		{RunID: "f-2", State: "failed", Profile: "demo", Labels: map[string]string{"pr": "7"}},
		{RunID: "s-3", State: "succeeded", Profile: "claude", Labels: map[string]string{"pr": "8"}},
		{RunID: "r-4", State: kv.RunRunning, Profile: "claude", Labels: map[string]string{"pr": "7"}},
	} {
		r.Node, r.Attempt, r.CreatedAt = "n1", 1, t0.Add(time.Duration(i)*time.Minute)
		if _, err := runs.Create(t.Context(), r.RunID, r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(out string) string {
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] { // under the header
			got = append(got, strings.Fields(l)[0])
		}
		return strings.Join(got, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs"}, "r-4 s-3 f-2 f-1"},
		{[]string{"runs", "list", "--state", "failed"}, "f-2 f-1"},
		{[]string{"runs", "--state", "failed,running", "--profile", "claude"}, "r-4 f-1"},
		{[]string{"runs", "list", "--label", "pr=7", "--limit", "2"}, "r-4 f-2"},
	} {
		out, errOut, err := e.run("", tc.args...)
		if err != nil || ids(out) != tc.want {
			t.Errorf("%q: %v, %s\n%s\nwant %s", tc.args, err, errOut, out, tc.want)
		}
	}
	if out, _, err := e.run("", "runs", "list", "--profile", "codex"); err != nil || out != "no runs match (of 4)\n" {
		t.Errorf("runs list matching none: %v %q", err, out)
	}
	if _, _, err := e.run("", "runs", "list", "--state", "done"); err == nil || !strings.Contains(err.Error(), "not a run state") {
		t.Errorf("runs list --state done: %v", err)
	}
}

// TestPrintRunShowsEveryField: `baton runs get` ("every field of one run's
// record") shows each field of the record, where it left out the input,
// retries, the kept job and the interactive fields.
func TestPrintRunShowsEveryField(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	code := 3
	full := kv.RunRecord{RunID: "r1", State: "failed", Node: "n1", Worker: "w1", Profile: "chat", Attempt: 2, Deadline: at.Add(time.Hour),
		CancelRequested: true, Interactive: true, TurnEndField: "type", TurnEndEquals: "result", IdleTimeout: 30 * time.Minute,
		WaitingSince: at.Add(time.Minute), CreatedAt: at, StartedAt: at, FinishedAt: at.Add(2 * time.Minute), ExitCode: &code,
		Reason: "why not", Offset: 9, LastSeq: 4, Labels: map[string]string{"team": "a"}, Retries: 1, Key: "acme",
		Job: []byte(`{"runId":"r1","profile":"chat"}`), Input: "fix the\ntest", Spawning: true,
		Session: "s1", PauseAfter: time.Minute, PauseRequested: true, Events: "codex-exec",
		Policy: &policy.Policy{Allow: []string{"Read", "Bash(git status*)"}, Deny: []string{"Bash(curl *)"}}, AskTimeout: 45 * time.Second,
		Checkpoint: &kv.SessionCheckpoint{Object: "s1/r1", Size: 2048, Files: 3, TreeBytes: 4096},
		Usage: &protocol.Usage{WallSeconds: 2.5, CPUSeconds: 1.25, CPUUserSeconds: 1, CPUSystemSeconds: 0.25, MaxRSSBytes: 3 << 20,
			StdoutBytes: 4096, Lines: 12, Inputs: 2, Agent: protocol.AgentUsage{InputTokens: 5, OutputTokens: 6, CacheTokens: 7, CostUSD: 0.125}}}
	var b strings.Builder
	if err := printRun(&b, full); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // a field of the record: the row that shows it
		"runId": "Run ID:            r1", "state": "State:             failed", "profile": "Profile:           chat",
		"node": "Node:              n1", "worker": "Worker:            w1", "attempt": "Attempt:           2",
		"retries": "Retries:           1", "cancelRequested": "Cancel requested:  true", "createdAt": "Created:           " + fmtTime(at),
		"startedAt": "Started:           " + fmtTime(at), "finishedAt": "Finished:          " + fmtTime(at.Add(2*time.Minute)),
		"deadline": "Deadline:          " + fmtTime(at.Add(time.Hour)), "exitCode": "Exit code:         3",
		"reason": "Reason:            why not", "offset": "Journal offset:    9", "lastSeq": "Last event seq:    4",
		"input": `Input:             fix the\ntest`, "job": "Job:               kept, 31 B ('baton rerun r1' runs it again)",
		"interactive": "Interactive:       yes (stdin: stream)", "turnEndField": "a turn ends at type=result",
		"turnEndEquals": "type=result", "idleTimeout": "idle timeout 30m0s",
		"waitingSince": "Waiting since:     " + fmtTime(at.Add(time.Minute)), "spawning": "Spawning:          true",
		"labels": "Label team:        a", "session": "Session:           s1", "key": "Concurrency key:   acme",
		"pauseAfter": "Pause:             after waiting 1m0s", "pauseRequested": "1m0s; requested",
		"checkpoint": "Checkpoint:        s1/r1, 3 files, 4.0 KiB (2.0 KiB stored)",
		"events":     "Events dialect:    codex-exec",
		"policy":     "Policy:            default ask; allow Read, Bash(git status*); deny Bash(curl *); an ask waits 45s",
		"askTimeout": "an ask waits 45s",
		"usage":      "Usage:             wall 2.5s, cpu 1.25s (user 1s, system 250ms), max rss 3.0 MiB, stdout 4.0 KiB in 12 lines, 2 inputs, egress 0 B, stored 0 B, tokens 5 in/6 out/7 cache, $0.1250",
	}
	// A run under way has no offset and sequence recorded yet: not 0.
	var running strings.Builder
	full.State = kv.RunRunning
	if err := printRun(&running, full); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(running.String(), "Journal offset:    - (recorded when the run ends)") {
		t.Errorf("a running run's offset:\n%s", running.String())
	}
	for f := range reflect.TypeFor[kv.RunRecord]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		row, ok := want[name]
		if !ok {
			t.Errorf("the record's field %s: this test knows no row that shows it", name)
		} else if !strings.Contains(b.String(), row) {
			t.Errorf("the record's field %s: no %q in\n%s", name, row, b.String())
		}
	}
}

// TestFmtTimeNamesTheZone: the CLI's times name their zone, the local one
// (runs, runs get, dlq, watch's rejection), where they showed a bare
// local time.
func TestFmtTimeNamesTheZone(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	if got, want := fmtTime(at), at.Local().Format("2006-01-02 15:04:05 ")+at.Local().Format("MST"); got != want {
		t.Fatalf("fmtTime = %q, want %q", got, want)
	}
	if fmtTime(time.Time{}) != "-" {
		t.Fatal("a time never set is not shown as -")
	}
}
