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

	"github.com/batonhq/baton/client"
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
// The row's runs take a sandbox of their profile's pool (profile "pool",
// started ahead of the job); cold starts run between, reported beside.
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
	cfg := filepath.Join(e.dir, "worker-start.yaml")
	if err := os.WriteFile(cfg, []byte(workerConfig+startPoolProfile), 0o600); err != nil {
		return fail(err)
	}
	w, err := e.startWorkerWith(ctx, "start", 4, cfg)
	if err != nil {
		return fail(err)
	}
	defer w.stop(15 * time.Second)
	// The agent is /bin/echo printing one line: as cheap as the anchor's
	// `true`, so the ratio is baton's own cost. The same cold, and baton's
	// fake agent cold (a Go program, the 32 MB baton binary, whose start
	// alone takes 5-8 ms), run between, for comparison.
	var runs, started, anchors, takes, agents, colds, coldAgents, goRuns, autos []time.Duration
	autoTook := 0
	for i := range sz.starts {
		d, err := timeCommand(ctx, e.anchorLimit, nil, e.bwrapAnchor)
		if err != nil {
			return anchorNA("start", startTarget, err)
		}
		anchors = append(anchors, d)
		// The pool refills after each take: the row times a take, not a
		// cold start behind an empty pool.
		if err := e.waitPool(ctx, w, "line-pooled", 1); err != nil {
			return fail(err)
		}
		t, err := e.timeStart(ctx, fmt.Sprintf("bench-start-%d", i), "line-pooled")
		if err != nil {
			return fail(err)
		}
		if t.take == 0 {
			return fail(fmt.Errorf("run bench-start-%d did not take a prestarted sandbox; see %s", i, e.runDir(fmt.Sprintf("bench-start-%d", i)).State()))
		}
		runs, started = append(runs, t.first), append(started, t.started)
		takes, agents = append(takes, t.take), append(agents, t.agent)
		c, err := e.timeStart(ctx, fmt.Sprintf("bench-start-cold-%d", i), "line")
		if err != nil {
			return fail(err)
		}
		colds, coldAgents = append(colds, c.first), append(coldAgents, c.agent)
		g, err := e.timeStart(ctx, fmt.Sprintf("bench-start-go-%d", i), "fake", "--lines", "1")
		if err != nil {
			return fail(err)
		}
		goRuns = append(goRuns, g.first)
		// The default: a profile without "pool", whose first run starts
		// cold and gives it an adaptive pool, refilled between these
		// runs as it would be between a user's.
		a, err := e.timeStart(ctx, fmt.Sprintf("bench-start-auto-%d", i), "line-auto")
		if err != nil {
			return fail(err)
		}
		if a.take != 0 {
			autoTook++
		}
		autos = append(autos, a.first)
	}
	run, anchor, cold, goRun := median(runs), median(anchors), median(colds), median(goRuns)
	ratio := float64(run) / float64(anchor)
	auto := median(autos)
	e.logf("start: p50 %s (started status %s; cold %s; Go agent cold %s; adaptive pool %s, %d of %d taken) vs bwrap %s", run, median(started), cold, goRun, auto, autoTook, len(autos), anchor)
	return Result{
		Row: "start", Target: startTarget,
		Measured: fmt.Sprintf("p50 %s (max %s) vs bwrap %s = %.1f× (%d runs of /bin/echo on prestarted sandboxes); p50 from the submit: taken %s, agent started %s, \"started\" %s, first line %s; cold (no pool): p50 %s = %.1f×, agent started %s; cold with baton's fake agent (Go): p50 %s = %.1f×; the default (no \"pool\", adaptive): p50 %s = %.1f×, %d of %d runs on a prestarted sandbox",
			ms(run), ms(quantile(runs, 1)), ms(anchor), ratio, len(runs),
			ms(median(takes)), ms(median(agents)), ms(median(started)), ms(run),
			ms(cold), float64(cold)/float64(anchor), ms(median(coldAgents)),
			ms(goRun), float64(goRun)/float64(anchor),
			ms(auto), float64(auto)/float64(anchor), autoTook, len(autos)),
		Pass: verdict(ratio <= 3),
	}
}

// startPoolProfile is the start row's pooled profiles: the line profile
// with two sandboxes started ahead, and with the default adaptive pool.
const startPoolProfile = `  line-pooled:
    command: ["/bin/echo", "{\"type\":\"bench\",\"line\":1}"]
    timeout: 1h
    network: none
    pool: 2
  line-auto:
    command: ["/bin/echo", "{\"type\":\"bench\",\"line\":1}"]
    timeout: 1h
    network: none
`

// waitPool waits until worker w holds n prestarted sandboxes of profile
// ready for a take. Not the entries' own records: a sandbox says it waits
// a moment before its worker has it in hand, and a run submitted between
// starts cold (a loaded fresh-clone CI's first round did).
func (e *env) waitPool(ctx context.Context, w *workerProc, profile string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		if r := w.report.Load(); r != nil {
			ready = r.Pools[profile]
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %s holds %d prestarted sandboxes of %s after 30 s, want %d; see %s", w.id, ready, profile, n, filepath.Join(e.dir, w.id+".log"))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTimes are a run's start, from the submit of its job.
type startTimes struct {
	take    time.Duration // to a prestarted runner's "take" record (zero for a cold start)
	agent   time.Duration // to the agent's start (the chain's "start-agent" record)
	started time.Duration // to its "started" status
	first   time.Duration // to its first line at the subscriber
}

// timeStart submits a one-line run and returns the times from the submit
// to its "started" status and to the first line the live subscriber
// gets; it waits for the run's end.
func (e *env) timeStart(ctx context.Context, runID, profile string, args ...string) (startTimes, error) {
	return e.timeSubmit(ctx, protocol.Job{RunID: runID, Profile: profile, Args: args})
}

// timeSubmit is timeStart of job, submitted with opts (a concurrency key).
func (e *env) timeSubmit(ctx context.Context, job protocol.Job, opts ...client.SubmitOption) (startTimes, error) {
	runID := job.RunID
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
	if err := e.client.Submit(ctx, job, opts...); err != nil {
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
		t.take, t.agent = since(ph["outer/take"]), since(ph["inner-child/start-agent"])
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
    pool: 0
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
