package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
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
	if _, _, err := e.run("", "runs", "list", "--state", "done"); err == nil || !strings.Contains(err.Error(), "not a run state") {
		t.Errorf("runs list --state done: %v", err)
	}
}
