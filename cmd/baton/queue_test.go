package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// queueAt is the moment the sample queue is shown at: its jobs' waits
// are fixed, so the outputs are too.
var queueAt = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// TestPrintQueue: `baton queue`'s output, whole.
func TestPrintQueue(t *testing.T) {
	v := testenv.SampleQueue(queueAt)
	for _, tc := range []struct {
		name  string
		v     protocol.QueueView
		key   string
		limit int
		want  string
	}{
		{"every key", v, "", 0, `3 workers, 1 free slot

KEY       RUNNING       WEIGHT  WAITING
acme      2/2           3       4
globex    0 (no limit)  1       1
umbrella  0/1           2       1
initech   1/4           1       0

KEY       POS  RUN ID          PROFILE  PRIO  WAITING FOR  REASON
acme      1    run-acme-7      claude   5     3m05s        key at its limit
acme      2    run-acme-5      claude   3     42s          behind its key's earlier jobs
acme      3    run-acme-6      codex    3     2h03m        behind its key's earlier jobs
globex    1    run-globex-1    codex    1     2d02h        profile at its limit on every free worker
umbrella  1    run-umbrella-1  demo     3     9s           no free worker
acme: 1 more job waiting, not listed (--limit lists up to 100 per key)
`},
		{"one key, one job listed", testenv.QueueFor(v, protocol.QueueRequest{Key: "acme", Limit: 1}), "acme", 1, `3 workers, 1 free slot

KEY   RUNNING  WEIGHT  WAITING
acme  2/2      3       4

KEY   POS  RUN ID      PROFILE  PRIO  WAITING FOR  REASON
acme  1    run-acme-7  claude   5     3m05s        key at its limit
acme: 3 more jobs waiting, not listed (--limit lists up to 100 per key)
`},
		{"as many as the workers list", testenv.QueueFor(v, protocol.QueueRequest{Key: "acme", Limit: 1}), "acme", 100, `3 workers, 1 free slot

KEY   RUNNING  WEIGHT  WAITING
acme  2/2      3       4

KEY   POS  RUN ID      PROFILE  PRIO  WAITING FOR  REASON
acme  1    run-acme-7  claude   5     3m05s        key at its limit
acme: 3 more jobs waiting, not listed (the workers list at most 100 per key)
`},
		{"a key running, nothing waiting", testenv.QueueFor(v, protocol.QueueRequest{Key: "initech"}), "initech", 0, `3 workers, 1 free slot

KEY      RUNNING  WEIGHT  WAITING
initech  1/4      1       0
`},
		{"an idle key", testenv.QueueFor(v, protocol.QueueRequest{Key: "hooli"}), "hooli", 0, "3 workers, 1 free slot\nkey hooli has no job waiting or running\n"},
		{"nothing at all", protocol.QueueView{Workers: 1, FreeSlots: 4}, "", 0, "1 worker, 4 free slots\nno key has a job waiting or running\n"},
		{"a job whose wait is unknown, a reason this CLI does not know, a cell to clean",
			protocol.QueueView{Workers: 2, Keys: []protocol.KeyQueue{{Key: "k", Running: 1, Limit: 1, Weight: 1, Waiting: 1,
				Jobs: []protocol.QueuedJob{{RunID: "r1", Profile: "a\tb", Priority: 3, Position: 1, Reason: "drained"}}}}}, "", 0, `2 workers, 0 free slots

KEY  RUNNING  WEIGHT  WAITING
k    1/1      1       1

KEY  POS  RUN ID  PROFILE  PRIO  WAITING FOR  REASON
k    1    r1      a\tb     3     -            waiting (drained)
`},
	} {
		var b strings.Builder
		if err := printQueue(&b, tc.v, tc.key, tc.limit, queueAt); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, b.String(), tc.want)
		}
	}
}

// TestPrintWaitingList: `baton runs list --waiting`'s output.
func TestPrintWaitingList(t *testing.T) {
	v := testenv.SampleQueue(queueAt)
	all := waitingJobs(v)
	codex, err := runFilter{profile: "codex"}.applyWaiting(all)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		jobs   []waitingJob
		all    int
		more   []keyCount
		asJSON bool
		want   string
	}{
		{"every waiting job", all, len(all), unlisted(v), false, `KEY       POS  RUN ID          PROFILE  PRIO  WAITING FOR  REASON
acme      1    run-acme-7      claude   5     3m05s        key at its limit
acme      2    run-acme-5      claude   3     42s          behind its key's earlier jobs
acme      3    run-acme-6      codex    3     2h03m        behind its key's earlier jobs
globex    1    run-globex-1    codex    1     2d02h        profile at its limit on every free worker
umbrella  1    run-umbrella-1  demo     3     9s           no free worker
acme: 1 more job waiting, not listed (the workers list at most 100 per key)
`},
		{"--profile codex", codex, len(all), nil, false, `KEY     POS  RUN ID        PROFILE  PRIO  WAITING FOR  REASON
acme    3    run-acme-6    codex    3     2h03m        behind its key's earlier jobs
globex  1    run-globex-1  codex    1     2d02h        profile at its limit on every free worker
`},
		{"none match", nil, len(all), nil, false, "no waiting jobs match (of 5)\n"},
		{"none waits", nil, 0, nil, false, "no waiting jobs: no job waits in a concurrency key's lane\n"},
		{"json", all[4:], len(all), nil, true, `[
  {
    "key": "umbrella",
    "runId": "run-umbrella-1",
    "profile": "demo",
    "priority": 3,
    "position": 1,
    "since": "2026-12-05T11:59:51Z",
    "reason": "no_free_worker"
  }
]
`},
		{"json, none", nil, 0, nil, true, "[]\n"},
	} {
		var b strings.Builder
		if err := printWaitingList(&b, tc.jobs, tc.all, tc.more, tc.asJSON, queueAt); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, b.String(), tc.want)
		}
	}
}

func TestWaitedFor(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", time.Minute: "1m00s", 61*time.Minute + 30*time.Second: "1h01m",
		24 * time.Hour: "1d00h", -time.Second: "0s", // a worker's clock ahead
	} {
		if got := waitedFor(queueAt.Add(-d), queueAt); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
	if got := waitedFor(time.Time{}, queueAt); got != "-" {
		t.Errorf("no since: %q", got)
	}
}

// TestQueueFlags: `baton queue`'s flags, and the request they make.
func TestQueueFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    protocol.QueueRequest
		json    bool
		wantErr string
	}{
		{nil, protocol.QueueRequest{}, false, ""},
		{[]string{"--key", "acme"}, protocol.QueueRequest{Key: "acme"}, false, ""},
		{[]string{"--key=acme_2", "--limit", "100", "--json"}, protocol.QueueRequest{Key: "acme_2", Limit: 100}, true, ""},
		{[]string{"--limit", "0"}, protocol.QueueRequest{}, false, ""},
		{[]string{"--key", "a.b"}, protocol.QueueRequest{}, false, `--key "a.b": a concurrency key matches`},
		{[]string{"--key", "acme>"}, protocol.QueueRequest{}, false, "a concurrency key matches"},
		{[]string{"--limit", "101"}, protocol.QueueRequest{}, false, "--limit 101: want 0 (the workers' default, 10) to 100"},
		{[]string{"--limit", "-1"}, protocol.QueueRequest{}, false, "--limit -1"},
		{[]string{"--limit", "many"}, protocol.QueueRequest{}, false, `invalid argument "many"`},
		{[]string{"--waiting"}, protocol.QueueRequest{}, false, "unknown flag: --waiting"},
	} {
		var f queueFlags
		fl := pflag.NewFlagSet("queue", pflag.ContinueOnError)
		fl.SetOutput(&strings.Builder{})
		f.addFlags(fl)
		err := fl.Parse(tc.args)
		var got protocol.QueueRequest
		if err == nil {
			opts, oerr := f.options()
			for _, o := range opts {
				o(&got)
			}
			err = oerr
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || f.asJSON != tc.json {
			t.Errorf("%q: %+v json %v, %v; want %+v json %v", tc.args, got, f.asJSON, err, tc.want, tc.json)
		}
	}
}

// TestRunFilterWaiting: `baton runs list --waiting` keeps jobs by
// --profile and --limit; --state and --label, which choose records, are
// refused.
func TestRunFilterWaiting(t *testing.T) {
	all := waitingJobs(testenv.SampleQueue(queueAt))
	for _, tc := range []struct {
		f       runFilter
		want    string // the runIds kept, in order
		wantErr string
	}{
		{runFilter{waiting: true}, "run-acme-7 run-acme-5 run-acme-6 run-globex-1 run-umbrella-1", ""},
		{runFilter{waiting: true, profile: "claude"}, "run-acme-7 run-acme-5", ""},
		{runFilter{waiting: true, limit: 2}, "run-acme-7 run-acme-5", ""},
		{runFilter{waiting: true, profile: "codex", limit: 1}, "run-acme-6", ""},
		{runFilter{waiting: true, profile: "nosuch"}, "", ""},
		{runFilter{waiting: true, states: []string{"running"}}, "", "--state chooses run records"},
		{runFilter{waiting: true, labels: []string{"pr=1"}}, "", "--label chooses run records"},
		{runFilter{waiting: true, limit: -1}, "", "--limit -1"},
	} {
		got, err := tc.f.applyWaiting(all)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: %v, want an error with %q", tc.f, err, tc.wantErr)
			}
			continue
		}
		var ids []string
		for _, j := range got {
			ids = append(ids, j.RunID)
		}
		if err != nil || strings.Join(ids, " ") != tc.want {
			t.Errorf("%+v: kept %q, %v; want %q", tc.f, ids, err, tc.want)
		}
	}
}

// TestCLIQueue runs `baton queue` and `baton runs list --waiting` against
// a real server, where a stand-in answers the queue request in place of
// the workers' endpoint (tested in package worker).
func TestCLIQueue(t *testing.T) {
	e := newCLIEnv(t)
	// With nobody answering, the command says so.
	if _, _, err := e.run("", "queue"); err == nil || !strings.Contains(err.Error(), "is a `baton worker` running?") {
		t.Errorf("queue with no worker: %v", err)
	}
	sample := testenv.SampleQueue(time.Now())
	standIn := testenv.StandInForWorkersQueue(t, e.js.Conn(), protocol.MustNames(""), sample)

	out, errOut, err := e.run("", "queue")
	if err != nil || !strings.HasPrefix(out, "3 workers, 1 free slot\n\nKEY       RUNNING       WEIGHT  WAITING\nacme      2/2           3       4\n") ||
		!strings.Contains(out, "umbrella  1    run-umbrella-1  demo     3") || !strings.Contains(out, "no free worker\n") {
		t.Errorf("queue: %v %s\n%s", err, errOut, out)
	}
	out, _, err = e.run("", "queue", "--key", "acme", "--limit", "2")
	if err != nil || strings.Contains(out, "globex") || !strings.Contains(out, "run-acme-5") || strings.Contains(out, "run-acme-6") ||
		!strings.HasSuffix(out, "acme: 2 more jobs waiting, not listed (--limit lists up to 100 per key)\n") {
		t.Errorf("queue --key acme --limit 2: %v\n%s", err, out)
	}
	out, _, err = e.run("", "queue", "--json")
	var v protocol.QueueView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.Keys) != 4 || v.Keys[0].Jobs[0].RunID != "run-acme-7" {
		t.Errorf("queue --json: %v\n%s", err, out)
	}
	out, _, err = e.run("", "runs", "list", "--waiting", "--profile", "codex")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 4 ||
		!strings.HasPrefix(lines[1], "acme    3    run-acme-6    codex    3") || !strings.HasPrefix(lines[2], "globex  1    run-globex-1  codex    1") ||
		lines[3] != "acme: 1 more job waiting, not listed (the workers list at most 100 per key)" {
		t.Errorf("runs list --waiting --profile codex: %v\n%s", err, out)
	}
	out, _, err = e.run("", "runs", "--waiting", "--json", "--limit", "1")
	var jobs []waitingJob
	if err != nil || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 || jobs[0].Key != "acme" || jobs[0].Reason != protocol.WaitKeyLimit {
		t.Errorf("runs --waiting --json --limit 1: %v\n%s", err, out)
	}
	// What went on the wire: the flags, as the contract's request.
	want := []protocol.QueueRequest{{Limit: 10}, {Key: "acme", Limit: 2}, {Limit: 10}, {Limit: 100}, {Limit: 100}}
	if got := standIn.Requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
	// Bad flags are refused before anything is asked.
	for _, args := range [][]string{{"queue", "--key", "a b"}, {"runs", "list", "--waiting", "--state", "running"}, {"queue", "--limit", "1000"}} {
		if _, _, err := e.run("", args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if n := len(standIn.Requests()); n != len(want) {
		t.Errorf("bad flags sent %d requests", n-len(want))
	}
	// A refusal's sentence reaches the user.
	standIn.Stop()
	refuse, err := e.js.Conn().Subscribe(protocol.MustNames("").ReadQueueSubject(), func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorCodeHeader, protocol.QueueFailed)
		r.Header.Set(micro.ErrorHeader, "cannot read the slots: timeout")
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer refuse.Unsubscribe()
	if _, _, err := e.run("", "queue"); err == nil || err.Error() != "read the queue: refused (500): cannot read the slots: timeout" {
		t.Errorf("a refusal: %v", err)
	}
}
