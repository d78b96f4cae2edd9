package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/protocol"
)

const (
	startTarget      = "p50 ≤ 3 × bwrap true, network none"
	startPastaTarget = "p50 ≤ pasta true + 20 ms"
)

// anchorLimit bounds one run of an anchor command, which takes
// milliseconds: one that hangs (Debian 12's pasta did, rarely) makes its
// row n/a instead of holding the suite.
const anchorLimit = 30 * time.Second

// anchorNA is a row whose anchor failed or hung: nothing to measure the
// runs against.
func anchorNA(row, target string, err error) Result {
	return Result{Row: row, Target: target, Measured: "n/a: the anchor failed: " + firstLine(err.Error()), Pass: na}
}

// start: job published to the first line of the run received, network
// none, against `bwrap --ro-bind / / true` measured in between; then the
// same with an egress allowlist (pasta), against pasta starting `true`.
// Runs are sequential, each ended before the next: the worker is idle.
func (e *env) start(ctx context.Context, sz sizes) []Result {
	res := []Result{e.startNone(ctx, sz)}
	e.stopWorkers() // the next worker has a profile this one lacks
	return append(res, e.startPasta(ctx, sz))
}

func (e *env) startNone(ctx context.Context, sz sizes) Result {
	fail := func(err error) Result { return failed("start", startTarget, err)[0] }
	if _, err := exec.LookPath("bwrap"); err != nil {
		return Result{Row: "start", Target: startTarget, Measured: "n/a: bwrap is missing (apt-get install bubblewrap)", Pass: na}
	}
	if _, err := e.startWorker(ctx, "start", 4); err != nil {
		return fail(err)
	}
	// The agent is /bin/echo printing one line: as cheap as the anchor's
	// `true`, so the ratio is baton's own cost. baton's fake agent (a Go
	// program, the 32 MB baton binary, whose start alone takes 5-8 ms)
	// runs between, for comparison with the figures before it.
	var runs, started, anchors, outers, readies, agents, goRuns []time.Duration
	for i := range sz.starts {
		d, err := timeCommand(ctx, e.anchorLimit, nil, e.bwrapAnchor)
		if err != nil {
			return anchorNA("start", startTarget, err)
		}
		anchors = append(anchors, d)
		t, err := e.timeStart(ctx, fmt.Sprintf("bench-start-%d", i), "line")
		if err != nil {
			return fail(err)
		}
		runs, started = append(runs, t.first), append(started, t.started)
		outers, readies, agents = append(outers, t.outer), append(readies, t.ready), append(agents, t.agent)
		g, err := e.timeStart(ctx, fmt.Sprintf("bench-start-go-%d", i), "fake", "--lines", "1")
		if err != nil {
			return fail(err)
		}
		goRuns = append(goRuns, g.first)
	}
	run, anchor, goRun := median(runs), median(anchors), median(goRuns)
	ratio := float64(run) / float64(anchor)
	e.logf("start: p50 %s (started status %s; Go agent %s) vs bwrap %s", run, median(started), goRun, anchor)
	return Result{
		Row: "start", Target: startTarget,
		Measured: fmt.Sprintf("p50 %s (max %s) vs bwrap %s = %.1f× (%d runs of /bin/echo); p50 from the submit: runner-outer up %s, ready %s, \"started\" %s, agent started %s, first line %s; with baton's fake agent (Go) instead: p50 %s = %.1f×",
			ms(run), ms(quantile(runs, 1)), ms(anchor), ratio, len(runs),
			ms(median(outers)), ms(median(readies)), ms(median(started)), ms(median(agents)), ms(run),
			ms(goRun), float64(goRun)/float64(anchor)),
		Pass: verdict(ratio <= 3),
	}
}

// startTimes are a run's start, from the submit of its job.
type startTimes struct {
	outer   time.Duration // to runner-outer's first record: the worker took the job and spawned the runner
	ready   time.Duration // to runner-outer's "ready": the worker's sandbox.Start returns
	agent   time.Duration // to the agent's start (the chain's "start-agent" record)
	started time.Duration // to its "started" status
	first   time.Duration // to its first line at the subscriber
}

// timeStart submits a one-line run and returns the times from the submit
// to its "started" status and to the first line the live subscriber
// gets; it waits for the run's end.
func (e *env) timeStart(ctx context.Context, runID, profile string, args ...string) (startTimes, error) {
	var (
		once    sync.Once
		first   = make(chan time.Time, 1)
		started = make(chan time.Time, 1)
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		switch {
		case m.kind != protocol.KindStatus:
			once.Do(func() { first <- m.at })
		case m.status != nil && m.status.Status == protocol.StatusStarted:
			started <- m.at
		}
	})
	if err != nil {
		return startTimes{}, err
	}
	defer sub.Unsubscribe()
	began := time.Now()
	if err := e.client.Submit(ctx, protocol.Job{RunID: runID, Profile: profile, Args: args}); err != nil {
		return startTimes{}, err
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, time.Minute)
	if err != nil {
		return startTimes{}, err
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return startTimes{}, &runFailed{st}
	}
	var t startTimes
	select {
	case at := <-first:
		t.first = at.Sub(began)
	default:
		return t, fmt.Errorf("run %s ended without a line", runID)
	}
	select {
	case at := <-started:
		t.started = at.Sub(began)
	default:
		return t, fmt.Errorf("run %s had no started status", runID)
	}
	// Where the time went, from the runner chain's records (zero when
	// one is missing; they are stamped on the same clock).
	since := func(at time.Time) time.Duration {
		if at.IsZero() {
			return 0
		}
		return at.Sub(began)
	}
	if b, err := os.ReadFile(e.runDir(runID).State()); err == nil {
		ph := phaseTimes(b)
		t.outer, t.ready, t.agent = since(ph["outer/spec"]), since(ph["outer/ready"]), since(ph["inner-child/start-agent"])
	}
	return t, nil
}

// runFailed: a run ended other than succeeded.
type runFailed struct{ st protocol.Status }

func (r *runFailed) Error() string {
	return fmt.Sprintf("run %s ended %s: %s", r.st.RunID, r.st.Status, r.st.Reason)
}

// startPasta measures runs with an egress allowlist, if this build's
// sandbox runs them: a worker is started with such a profile and one run
// tried; a run refused by the sandbox makes the row n/a.
func (e *env) startPasta(ctx context.Context, sz sizes) Result {
	fail := func(err error) Result { return failed("start, pasta", startPastaTarget, err)[0] }
	if _, err := exec.LookPath("pasta"); err != nil {
		return Result{Row: "start, pasta", Target: startPastaTarget, Measured: "n/a: pasta is missing (apt-get install passt)", Pass: na}
	}
	cfg := filepath.Join(e.dir, "worker-pasta.yaml")
	conf := workerConfig + `  fake-net:
    command: ["{baton}", "fake-agent"]
    allowArgs: true
    timeout: 1h
    network:
      allow: [example.com]
`
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return fail(err)
	}
	w, err := e.startWorkerWith(ctx, "start-pasta", 4, cfg)
	if err != nil {
		return Result{Row: "start, pasta", Target: startPastaTarget, Measured: "n/a: the worker refuses an allowlist profile: " + firstLine(err.Error()), Pass: na}
	}
	defer w.stop(15 * time.Second)
	var runs, anchors []time.Duration
	for i := range sz.starts {
		t, err := e.timeStart(ctx, fmt.Sprintf("bench-start-pasta-%d", i), "fake-net", "--lines", "1")
		var rf *runFailed
		if i == 0 && errors.As(err, &rf) {
			return Result{Row: "start, pasta", Target: startPastaTarget, Measured: "n/a: not built yet (" + firstLine(rf.st.Reason) + ")", Pass: na}
		}
		if err != nil {
			return fail(err)
		}
		runs = append(runs, t.first)
		// pasta as the sandbox user, the way the runner starts it.
		d, err := timeCommand(ctx, e.anchorLimit, sandboxCredential(), e.pastaAnchor)
		if err != nil {
			return anchorNA("start, pasta", startPastaTarget, err)
		}
		anchors = append(anchors, d)
	}
	run, anchor := median(runs), median(anchors)
	e.logf("start with pasta: p50 %s vs pasta %s", run, anchor)
	return Result{
		Row: "start, pasta", Target: startPastaTarget,
		Measured: fmt.Sprintf("p50 %s vs pasta %s: %+.2f ms (%d runs)", ms(run), ms(anchor), float64(run-anchor)/float64(time.Millisecond), len(runs)),
		Pass:     verdict(run-anchor <= 20*time.Millisecond),
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
