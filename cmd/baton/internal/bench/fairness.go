package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// The fairness row's worker: fairnessSlots slots, every key limited to as
// many runs at once across the cluster.
const (
	fairnessSlots    = 4
	fairnessKeyLimit = 4
	fairnessSmall    = "small" // the key of the overhead's keyed jobs and of the small jobs
	fairnessBig      = "big"
	fairnessOverhead = "keyed p50 ≤ 1.2 × unkeyed, job published → first line"
)

func fairnessWaitTarget(sz sizes) string {
	return fmt.Sprintf("a small key's job behind a big key's %d waits ≤ one slot's time + a start", sz.fairnessBig)
}

// fairnessConfig is workerConfig with a limit on every key.
func fairnessConfig() string {
	return "keyConcurrency:\n  default: " + strconv.Itoa(fairnessKeyLimit) + "\n" + workerConfig
}

// fairness: the keys' lanes (issue 30) against today's path, on one worker
// of fairnessSlots slots whose keys are limited to fairnessKeyLimit runs.
// First the scheduling overhead: runs one at a time, a keyed job of a
// limited key (published into its lane, started on a key slot) against an
// unkeyed one (the main consumer), alternately, job published → first
// line. Then the wait of a small key's jobs behind a big key's backlog.
func (e *env) fairness(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result {
		return append(failed("fairness", fairnessOverhead, err), failed("fairness, backlog", fairnessWaitTarget(sz), err)...)
	}
	cfg := filepath.Join(e.dir, "worker-fairness.yaml")
	if err := os.WriteFile(cfg, []byte(fairnessConfig()), 0o600); err != nil {
		return fail(err)
	}
	w, err := e.startWorkerWith(ctx, "fairness", fairnessSlots, cfg)
	if err != nil {
		return fail(err)
	}
	defer w.stop(15 * time.Second)
	over, start := e.fairnessOverhead(ctx, sz, w)
	return []Result{over, e.fairnessBacklog(ctx, sz, start)}
}

// fairnessOverhead measures sz.fairnessPairs keyed and unkeyed runs of the
// fake agent printing one line, one at a time, in alternating order, after
// one of each not counted (a key's first job creates its lane's consumer:
// reported beside). It returns the row and the unkeyed runs' p50 from the
// submit to their "started" status: a start on an idle worker.
func (e *env) fairnessOverhead(ctx context.Context, sz sizes, w *workerProc) (Result, time.Duration) {
	fail := func(err error) (Result, time.Duration) { return failed("fairness", fairnessOverhead, err)[0], 0 }
	var (
		keyed, unkeyed               []time.Duration // to the first line
		keyedStarted, unkeyedStarted []time.Duration
		keyedCPU, unkeyedCPU         time.Duration // the worker's
		keyedSrv, unkeyedSrv         time.Duration // the suite's process: NATS, the subscriber
		firstKeyed                   time.Duration
	)
	self := os.Getpid()
	for i := -1; i < sz.fairnessPairs; i++ {
		order := []bool{false, true}
		if i%2 != 0 {
			order = []bool{true, false}
		}
		for _, isKeyed := range order {
			name := "unkeyed"
			var opts []client.SubmitOption
			if isKeyed {
				name = "keyed"
				opts = append(opts, client.WithKey(fairnessSmall, 0))
			}
			id := fmt.Sprintf("bench-fair-%s-%d", name, i)
			if i < 0 {
				id = "bench-fair-" + name + "-warm"
			}
			c0, err0 := threadsCPU(w.pid())
			s0, err1 := threadsCPU(self)
			t, err := e.timeSubmit(ctx, protocol.Job{RunID: id, Profile: "fake", Args: []string{"--lines", "1"}}, opts...)
			if err != nil {
				return fail(err)
			}
			c1, err2 := threadsCPU(w.pid())
			s1, err3 := threadsCPU(self)
			if err := cmpErr(err0, err1, err2, err3); err != nil {
				return fail(err)
			}
			switch {
			case i < 0:
				if isKeyed {
					firstKeyed = t.first
				}
			case isKeyed:
				keyed, keyedStarted = append(keyed, t.first), append(keyedStarted, t.started)
				keyedCPU, keyedSrv = keyedCPU+c1-c0, keyedSrv+s1-s0
			default:
				unkeyed, unkeyedStarted = append(unkeyed, t.first), append(unkeyedStarted, t.started)
				unkeyedCPU, unkeyedSrv = unkeyedCPU+c1-c0, unkeyedSrv+s1-s0
			}
		}
	}
	k, u := median(keyed), median(unkeyed)
	ratio := float64(k) / float64(u)
	n := time.Duration(len(keyed))
	e.logf("fairness: keyed p50 %s vs unkeyed %s = %.2f×; worker CPU a job %s vs %s", k, u, ratio, keyedCPU/n, unkeyedCPU/n)
	return Result{
		Row: "fairness", Target: fairnessOverhead,
		Measured: fmt.Sprintf("keyed p50 %s (max %s) vs unkeyed %s (max %s) = %.2f× (%+.2f ms; %d runs each of the fake agent, one at a time, key limit %d); to \"started\" %s vs %s = %.2f×; a key's first job (its lane's consumer created) %s; CPU a job: worker %s vs %s, suite (NATS, subscriber) %s vs %s",
			ms(k), ms(quantile(keyed, 1)), ms(u), ms(quantile(unkeyed, 1)), ratio, float64(k-u)/float64(time.Millisecond), len(keyed), fairnessKeyLimit,
			ms(median(keyedStarted)), ms(median(unkeyedStarted)), float64(median(keyedStarted))/float64(median(unkeyedStarted)), ms(firstKeyed),
			ms(keyedCPU/n), ms(unkeyedCPU/n), ms(keyedSrv/n), ms(unkeyedSrv/n)),
		Pass: verdict(ratio <= 1.2),
	}, median(unkeyedStarted)
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fairnessBacklog: key big gets sz.fairnessBig short runs at once, more
// than the worker's slots; once they fill every slot, key small's jobs are
// published one at a time (each after the last one started, at a random
// moment of a run), and each one's wait is timed from its publish to its
// "started" status. A free slot goes to the small key first (tenancy.Fair),
// so its job should wait at most for one slot to free, then its own
// start: the anchor is a slot's time, a big run's from its runner's first
// record (the worker has just taken its job) to its terminal status, the
// median of the row's big runs. The bound is a slot's time and a start
// under the same load (a big run's, taken → "started"); start, a run's
// start on the idle worker (the overhead's unkeyed p50), is reported beside.
func (e *env) fairnessBacklog(ctx context.Context, sz sizes, start time.Duration) Result {
	target := fairnessWaitTarget(sz)
	fail := func(err error) Result { return failed("fairness, backlog", target, err)[0] }
	var (
		mu      sync.Mutex
		started = map[string]time.Time{}
		ended   = map[string]time.Time{}
		poke    = make(chan struct{}, 1)
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.Prefix()+".runs.*.*", func(m runMsg) {
		term.see(m)
		if m.status == nil {
			return
		}
		mu.Lock()
		switch {
		case m.status.Status == protocol.StatusStarted:
			if _, ok := started[m.runID]; !ok {
				started[m.runID] = m.at
			}
		case m.status.Status.Terminal():
			ended[m.runID] = m.at
		}
		mu.Unlock()
		select {
		case poke <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	// waitFor waits until cond holds (under mu).
	waitFor := func(what string, limit time.Duration, cond func() bool) error {
		deadline := time.NewTimer(limit)
		defer deadline.Stop()
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return fmt.Errorf("%s: not within %s", what, limit)
			case <-poke:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	runArgs := []string{"--duration", sz.fairnessRun.String(), "--rate", "10"}
	// cycleOf is a slot's time per job of a backlog: fairnessSlots starts
	// a cycle, at the mean gap between two (the starts come in bursts: a
	// median gap is not one).
	cycleOf := func(ids []string) time.Duration {
		var at []time.Time
		mu.Lock()
		for _, id := range ids {
			at = append(at, started[id])
		}
		mu.Unlock()
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		return time.Duration(fairnessSlots) * at[len(at)-1].Sub(at[0]) / time.Duration(max(len(at)-1, 1))
	}
	// First today's path: a backlog of unkeyed jobs, for its cycle.
	var flat []string
	for i := range sz.fairnessFlat {
		id := fmt.Sprintf("bench-fair-flat-%d", i)
		if err := e.client.Submit(ctx, protocol.Job{RunID: id, Profile: "fake", Args: runArgs}); err != nil {
			return fail(err)
		}
		flat = append(flat, id)
	}
	if _, err := e.waitRuns(ctx, term, flat, 10*time.Minute); err != nil {
		return fail(err)
	}
	flatCycle := cycleOf(flat)
	var ids, big []string
	for i := range sz.fairnessBig {
		id := fmt.Sprintf("bench-fair-big-%d", i)
		if err := e.client.Submit(ctx, protocol.Job{RunID: id, Profile: "fake", Args: runArgs}, client.WithKey(fairnessBig, 0)); err != nil {
			return fail(err)
		}
		ids, big = append(ids, id), append(big, id)
	}
	bigStarted := func() int {
		n := 0
		for _, id := range big {
			if _, ok := started[id]; ok {
				n++
			}
		}
		return n
	}
	if err := waitFor("every slot running a big job", time.Minute, func() bool { return bigStarted() >= fairnessSlots }); err != nil {
		return fail(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var waits []time.Duration
	behind := []int{} // big's jobs not started at each small publish
	for i := range sz.fairnessSmall {
		// At a random moment of the big runs' turns.
		time.Sleep(time.Duration(rnd.Int64N(int64(sz.fairnessRun))))
		id := fmt.Sprintf("bench-fair-small-%d", i)
		mu.Lock()
		behind = append(behind, len(big)-bigStarted())
		mu.Unlock()
		pub := time.Now()
		if err := e.client.Submit(ctx, protocol.Job{RunID: id, Profile: "fake", Args: runArgs}, client.WithKey(fairnessSmall, 0)); err != nil {
			return fail(err)
		}
		ids = append(ids, id)
		if err := waitFor("small job "+id+" started", time.Minute, func() bool { _, ok := started[id]; return ok }); err != nil {
			return fail(err)
		}
		mu.Lock()
		waits = append(waits, started[id].Sub(pub))
		mu.Unlock()
	}
	// term counts the unkeyed backlog's ends too.
	statuses, err := e.waitRuns(ctx, term, append(slices.Clone(flat), ids...), 10*time.Minute)
	if err != nil {
		return fail(err)
	}
	for _, id := range ids {
		if st := statuses[id]; st.Status != protocol.StatusSucceeded {
			return fail(&runFailed{st})
		}
	}
	// A big run's slot time and its agent's run time.
	var slot, agent, takeStart []time.Duration
	mu.Lock()
	for _, id := range big {
		agent = append(agent, ended[id].Sub(started[id]))
		b, err := os.ReadFile(e.runDir(id).State())
		if err != nil {
			continue
		}
		var first time.Time
		for _, at := range phaseTimes(b) {
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
		if !first.IsZero() {
			slot = append(slot, ended[id].Sub(first))
			takeStart = append(takeStart, started[id].Sub(first))
		}
	}
	mu.Unlock()
	if len(slot) < len(big)/2 {
		return fail(fmt.Errorf("%d of %d big runs have their runner's records", len(slot), len(big)))
	}
	cycle := cycleOf(big)
	anchor, p50, worst := median(slot), median(waits), quantile(waits, 1)
	// A start under the backlog's load: a big run's, taken → "started".
	loaded := median(takeStart)
	e.logf("fairness, backlog: small waits p50 %s, max %s vs slot %s (agent %s), start %s (idle %s)", p50, worst, anchor, median(agent), loaded, start)
	return Result{
		Row: "fairness, backlog", Target: target,
		Measured: fmt.Sprintf("small's wait p50 %s, max %s (%d jobs, published one at a time behind %d to %d of big's waiting; %d slots, key limit %d, runs of %s) vs a slot's time %s (a big run taken → ended; its agent's run %s; slots' cycle %s a job, against %s for a backlog of %d unkeyed jobs = %.2f×): p50 %.2f×, max %.2f× a slot; bound slot + a start under this load (a big run's, taken → \"started\", %s; %s idle) = %s",
			ms(p50), ms(worst), len(waits), slices.Min(behind), slices.Max(behind), fairnessSlots, fairnessKeyLimit, sz.fairnessRun,
			ms(anchor), ms(median(agent)), ms(cycle), ms(flatCycle), len(flat), float64(cycle)/float64(flatCycle),
			float64(p50)/float64(anchor), float64(worst)/float64(anchor), ms(loaded), ms(start), ms(anchor+loaded)),
		Pass: verdict(worst <= anchor+loaded),
	}
}
