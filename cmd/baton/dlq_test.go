package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

func TestParseSeq(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"4 2", 0, false},
		{"0x2a", 0, false},
		{"18446744073709551616", 0, false},
	} {
		got, err := parseSeq(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSeq(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestCLIDLQRetryDelete: a job a worker rejected for a profile it lacked
// runs, under its own id, once retried against a worker that has it; a
// retry of a run id that ran is refused unless given a new id; a job
// refused for its own content is not retried; delete removes entries.
func TestCLIDLQRetryDelete(t *testing.T) {
	e := newCLIEnv(t)
	stop := startWorker(t, e.js) // without the profile "later"
	if _, errOut, err := e.run("", "submit", "--profile", "later", "--run-id", "dl-1", "--input", "hello"); err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	e.publish(protocol.MustNames("").RunJobSubject(), `{"runId":"dl-2","profile":"later","nosuch":1}`, nil)
	entries := func() []dlqView {
		t.Helper()
		out, _, err := e.run("", "dlq", "--json")
		var v []dlqView
		if err != nil || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("dlq --json: %v\n%s", err, out)
		}
		return v
	}
	var dead []dlqView
	testenv.WaitFor(t, 20*time.Second, "both jobs in the DLQ", func() bool {
		dead = entries()
		return len(dead) == 2
	})
	bySeq := map[string]uint64{}
	for _, d := range dead {
		bySeq[d.Reason] = d.Seq
	}
	rejected, malformed := bySeq[string(protocol.ReasonUnknownProfile)], bySeq[string(protocol.ReasonUnknownField)]
	if rejected == 0 || malformed == 0 {
		t.Fatalf("DLQ entries %+v, want an unknown_profile and an unknown_field", dead)
	}
	stop()

	cfg := config.Default()
	cfg.Profiles["later"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--echo-input"}, Timeout: time.Minute}
	e.startWorker(cfg)
	seq := func(n uint64) string { return fmt.Sprint(n) }
	out, errOut, err := e.run("", "dlq", "retry", seq(rejected))
	if err != nil || out != "submitted DLQ entry "+seq(rejected)+" again as run dl-1\n" {
		t.Fatalf("dlq retry: %v, %q, %q", err, out, errOut)
	}
	if out, errOut, err := e.run("", "watch", "dl-1"); err != nil || !strings.Contains(out, "hello") || !strings.Contains(out, "● succeeded") {
		t.Fatalf("watch of the retried run: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if _, _, err := e.run("", "dlq", "retry", seq(rejected)); err == nil || !strings.Contains(err.Error(), "run dl-1 exists (state ") {
		t.Errorf("second retry of a job whose run ran: %v", err)
	}
	out, _, err = e.run("", "dlq", "retry", seq(rejected), "--run-id", "dl-1-b", "--json")
	var res struct {
		Seq   uint64 `json:"seq"`
		RunID string `json:"runId"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Seq != rejected || res.RunID != "dl-1-b" {
		t.Fatalf("dlq retry --run-id --json: %v, %q", err, out)
	}
	if out, _, err := e.run("", "watch", "dl-1-b"); err != nil || !strings.Contains(out, "hello") {
		t.Errorf("watch of the retry under a new id: %v\n%s", err, out)
	}
	if _, _, err := e.run("", "dlq", "retry", seq(malformed)); err == nil || !strings.Contains(err.Error(), "refused for its own content") {
		t.Errorf("retry of a job with an unknown field: %v", err)
	}
	// A run whose record expired while its chain is still stored: a worker
	// would not start its id again.
	names := protocol.MustNames("")
	e.chain("dl-old", [3]string{"status", statusJSON(protocol.StatusSucceeded, 0), ""})
	e.publish(names.DLQSubject(protocol.ReasonUnknownProfile), `{"runId":"dl-old","profile":"later"}`,
		map[string]string{protocol.HeaderReason: string(protocol.ReasonUnknownProfile)})
	old := entries()[0]
	if _, _, err := e.run("", "dlq", "retry", seq(old.Seq)); err == nil || !strings.Contains(err.Error(), "run dl-old ran before") {
		t.Errorf("retry of a job whose run ran and whose record expired: %v", err)
	}
	if _, _, err := e.run("", "dlq", "retry", "999"); err == nil || !strings.Contains(err.Error(), "no such dead letter") {
		t.Errorf("retry of no entry: %v", err)
	}

	if out, _, err := e.run("", "dlq", "delete", seq(rejected), seq(malformed), seq(old.Seq)); err != nil ||
		out != "deleted DLQ entry "+seq(rejected)+"\ndeleted DLQ entry "+seq(malformed)+"\ndeleted DLQ entry "+seq(old.Seq)+"\n" {
		t.Fatalf("dlq delete: %v, %q", err, out)
	}
	if left := entries(); len(left) != 0 {
		t.Errorf("after delete the DLQ holds %+v", left)
	}
	if _, _, err := e.run("", "dlq", "delete", seq(rejected)); err == nil || !strings.Contains(err.Error(), "no such dead letter") {
		t.Errorf("delete of a deleted entry: %v", err)
	}
	if _, _, err := e.run("", "dlq", "delete", "x"); err == nil || !strings.Contains(err.Error(), "not a DLQ sequence") {
		t.Errorf("delete x: %v", err)
	}
}
