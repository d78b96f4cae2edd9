package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestWatchRejectedJob: a job the worker rejects to the DLQ has no record
// and never will. submit --watch and watch say why, with the DLQ's reason,
// and exit 1, where they waited for ever; a healthy run does not say that
// it has no record, and a run nobody took says so only once the wait is
// long enough to mean it.
func TestWatchRejectedJob(t *testing.T) {
	e := newCLIEnv(t)
	e.startWorker(config.Default())

	start := time.Now()
	_, errOut, err := e.run("", "submit", "--profile", "nosuch", "--run-id", "rej-1", "--watch")
	if exitCode(err) != 1 || !strings.Contains(errOut, "run rej-1 was rejected (unknown_profile)") || !strings.Contains(errOut, `"nosuch"`) {
		t.Fatalf("submit --watch of a rejected job: exit %d (%v), stderr %q", exitCode(err), err, errOut)
	}
	if took := time.Since(start); took > noticeAfter {
		t.Errorf("the rejection took %v to tell", took)
	}
	if strings.Contains(errOut, "no record yet") {
		t.Errorf("a rejection told within %v also said there is no record yet: %q", noticeAfter, errOut)
	}
	_, errOut, err = e.run("", "watch", "rej-1")
	if exitCode(err) != 1 || !strings.Contains(errOut, "run rej-1 was rejected (unknown_profile)") {
		t.Fatalf("watch of a rejected job: exit %d (%v), stderr %q", exitCode(err), err, errOut)
	}

	out, errOut, err := e.run("", "submit", "--profile", "demo", "--run-id", "ok-1", "--input", "hi", "--watch")
	if err != nil || !strings.Contains(out, "● succeeded") || !strings.HasPrefix(out, "ok-1\nyou › hi\n● started") {
		t.Fatalf("submit --watch of a good job: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
	// A watch shows the job's input, from the record, as the first turn.
	if out, _, err := e.run("", "watch", "ok-1"); err != nil || !strings.HasPrefix(out, "you › hi\n● started") {
		t.Fatalf("watch of a finished run: %v\nstdout %q", err, out)
	}
	if strings.Contains(errOut, "no record yet") {
		t.Errorf("a healthy run said it has no record: %q", errOut)
	}
}

// TestWatchSaysWhenNobodyHoldsTheRun: after a hand-off that no worker takes
// up within a few seconds, watch says that nobody holds the run, where it
// went silent; a hand-off taken up at once says nothing more.
func TestWatchSaysWhenNobodyHoldsTheRun(t *testing.T) {
	e := newCLIEnv(t)
	names := protocol.MustNames("")
	status := func(run string, st protocol.StatusType, offset int) {
		e.publish(names.IngestSubject(run, protocol.KindStatus), statusJSON(st, 0), map[string]string{protocol.HeaderOffset: fmt.Sprint(offset)})
	}
	for _, tc := range []struct {
		run    string
		gap    time.Duration // between the hand-off and the next holder
		notice bool
	}{
		{"unheld", noticeAfter + 2*time.Second, true},
		{"taken", 0, false},
	} {
		t.Run(tc.run, func(t *testing.T) {
			status(tc.run, protocol.StatusStarted, 10)
			status(tc.run, protocol.StatusHandoff, 20)
			later := time.AfterFunc(tc.gap, func() {
				status(tc.run, protocol.StatusAttached, 20)
				status(tc.run, protocol.StatusSucceeded, 30)
			})
			defer later.Stop()
			out, errOut, err := e.run("", "watch", tc.run)
			if err != nil || !strings.Contains(out, "● succeeded") {
				t.Fatalf("watch: %v\nstdout %q\nstderr %q", err, out, errOut)
			}
			said := strings.Contains(errOut, "run "+tc.run+": no worker holds it since w1 handed it off")
			if said != tc.notice {
				t.Errorf("%v between hand-off and attach: said nobody holds the run %v, want %v; stderr %q", tc.gap, said, tc.notice, errOut)
			}
		})
	}
}

// TestWatchFollowsTheRetry: a run lost with its node and retried is
// followed on to its retry, and the watch's exit status is the retry's.
func TestWatchFollowsTheRetry(t *testing.T) {
	e := newCLIEnv(t)
	lost := protocol.Status{Status: protocol.StatusLost, RunID: "first", Worker: "w1", Node: "n1", Epoch: 4,
		Reason: "node n1 sent no heartbeat for more than 30s; retried as run first-a2", RetriedAs: "first-a2"}
	e.chain("first",
		[3]string{"status", statusJSON(protocol.StatusStarted, 0), ""},
		[3]string{"status", string(lost.Marshal()), ""})
	e.chain("first-a2",
		[3]string{"status", statusJSON(protocol.StatusStarted, 0), ""},
		[3]string{"events", `{"type":"assistant","message":{"content":[{"type":"text","text":"second try"}]}}`, ""},
		[3]string{"status", statusJSON(protocol.StatusSucceeded, 0), ""})
	out, errOut, err := e.run("", "watch", "first")
	if err != nil || !strings.Contains(out, "● lost") || !strings.Contains(out, "↻ following its retry, run first-a2\n● started") ||
		!strings.Contains(out, "second try\n● succeeded") {
		t.Fatalf("watch of a retried run: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
	// Without a retry, a lost run is the watch's end.
	lost.RetriedAs, lost.RunID = "", "alone"
	e.chain("alone", [3]string{"status", string(lost.Marshal()), ""})
	if _, _, err := e.run("", "watch", "alone"); exitCode(err) != 1 {
		t.Fatalf("watch of a lost run: exit %d (%v), want 1", exitCode(err), err)
	}
}

// TestSendWaitsForAJustSubmittedRun: a send or an interrupt right after a
// submit, while no worker has taken the job yet (the profile's one slot is
// busy), waits for the run's record, where it was refused with "run not
// found"; a run id nobody submitted is still refused, within the wait's
// bound.
func TestSendWaitsForAJustSubmittedRun(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, MaxConcurrent: 1}
	e.startWorker(cfg)
	for _, id := range []string{"busy-1", "early-1"} {
		if out, errOut, err := e.run("", "submit", "--profile", "chat", "--run-id", id, "--stream-json", "--input", "first"); err != nil {
			t.Fatalf("submit %s: %v %s %s", id, err, out, errOut)
		}
	}
	// A watch begun before early-1 has a record shows its job's input all
	// the same, as the run's first turn.
	wctx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watched, _, _ := e.start(wctx, nil, "watch", "early-1")
	// early-1 waits in the stream, with no record, until busy-1 frees the
	// profile's slot, a second after the send to early-1 is asked.
	type result struct {
		out, errOut string
		err         error
	}
	sent := make(chan result, 1)
	go func() {
		out, errOut, err := e.run("", "send", "early-1", "--stream-json", "second")
		sent <- result{out, errOut, err}
	}()
	time.Sleep(time.Second) // the send asks, and is told not found, meanwhile
	if out, _, err := e.run("", "send", "busy-1", "--eof"); err != nil {
		t.Fatalf("send to the run in the slot: %v %q", err, out)
	}
	if r := <-sent; r.err != nil || !strings.Contains(r.out, "sent to run early-1") {
		t.Fatalf("send before a worker took the job: %v\nstdout %q\nstderr %q", r.err, r.out, r.errOut)
	}
	if out, _, err := e.run("", "interrupt", "early-1"); err != nil || !strings.Contains(out, "interrupt sent to run early-1") {
		t.Fatalf("interrupt: %v %q", err, out)
	}
	testenv.WaitFor(t, 20*time.Second, "the watch of early-1 to show it started", func() bool { return strings.Contains(watched.String(), "● started") })
	if out := watched.String(); !strings.HasPrefix(out, "you › first\n● started") {
		t.Errorf("the watch begun before early-1 had a record shows %q, want its job's input first", out)
	}
	stopWatch()
	start := time.Now()
	if _, _, err := e.run("", "send", "never-submitted", "hi"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("send to a run nobody submitted: %v", err)
	}
	if took := time.Since(start); took < sendWaitRecord || took > sendWaitRecord+5*time.Second {
		t.Fatalf("send to a run nobody submitted took %v, want about %v", took, sendWaitRecord)
	}
}

// TestWatchSaysWhenNoWorkerAnswers: with no worker answering (none runs, or
// the only one crashed), watch says so after a few seconds and that it
// waits, where it went silent, and says when one answers again; a job
// submitted then and rejected by the worker that comes is told as a
// rejection, where the watch waited for ever (it looked for one only when
// a worker said the run had no record).
func TestWatchSaysWhenNoWorkerAnswers(t *testing.T) {
	e := newCLIEnv(t)
	names := protocol.MustNames("")
	status := func(run string, st protocol.StatusType, offset int) {
		e.publish(names.IngestSubject(run, protocol.KindStatus), statusJSON(st, 0), map[string]string{protocol.HeaderOffset: fmt.Sprint(offset)})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// A run under way whose only worker goes, then comes back.
	status("gone", protocol.StatusStarted, 10)
	out, errOut, done := e.start(ctx, nil, "watch", "gone")
	testenv.WaitFor(t, 10*time.Second, "watch to show the run started", func() bool { return strings.Contains(out.String(), "● started") })
	if err := e.stopRelay(); err != nil {
		t.Fatal(err)
	}
	const said = "run gone: no worker answers (is a `baton worker` running?): waiting for one"
	testenv.WaitFor(t, 20*time.Second, "watch to say that no worker answers", func() bool { return strings.Contains(errOut.String(), said) })
	e.startRelay()
	testenv.WaitFor(t, 10*time.Second, "watch to say that a worker answers again", func() bool {
		return strings.Contains(errOut.String(), "run gone: a worker answers again\n")
	})
	status("gone", protocol.StatusSucceeded, 20)
	if err := <-done; err != nil || !strings.Contains(out.String(), "● succeeded") {
		t.Fatalf("watch: %v\nstdout %q\nstderr %q", err, out.String(), errOut.String())
	}

	// A job submitted while no worker runs, rejected by the first that
	// starts.
	if err := e.stopRelay(); err != nil {
		t.Fatal(err)
	}
	out, errOut, done = e.start(ctx, nil, "submit", "--profile", "nosuch", "--run-id", "early", "--watch")
	testenv.WaitFor(t, 20*time.Second, "submit --watch to say that no worker answers", func() bool {
		return strings.Contains(errOut.String(), "run early: no worker answers")
	})
	if strings.Contains(errOut.String(), "no record yet") {
		t.Errorf("with no worker answering, watch said the run has no record: %q", errOut.String())
	}
	e.startWorker(config.Default())
	select {
	case err := <-done:
		if exitCode(err) != 1 || !strings.Contains(errOut.String(), "run early was rejected (unknown_profile)") {
			t.Fatalf("submit --watch of a job rejected once a worker came: exit %d (%v)\nstdout %q\nstderr %q", exitCode(err), err, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("submit --watch still waits 30 s after a worker rejected its job:\nstdout %q\nstderr %q", out.String(), errOut.String())
	}
}
