package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/protocol"
)

// densityLeaseTTL is the density row's lease TTL: the configuration's
// default, since lease upkeep is part of what an idle run costs.
const densityLeaseTTL = 15 * time.Second

// density: many idle runs on one worker (the agent is `sleep`, which
// prints nothing). Once every run has started, a window measures what they
// cost while idle: the CPU of the worker and of NATS (the suite's process,
// where the server is embedded; its subscribers get nothing while the runs
// are idle), against the same worker idle with no run; the baton
// processes each run keeps alive beside its agent and their PSS.
func (e *env) density(ctx context.Context, sz sizes) []Result {
	n := sz.densityRuns
	target := fmt.Sprintf("%d idle runs on one worker: worker + NATS ≤ 2%% of a core, baton PSS ≤ 1.5 MiB per run (lease TTL %s)", n, densityLeaseTTL)
	fail := func(err error) []Result { return failed("density", target, err) }
	cfg := filepath.Join(e.dir, "worker-density.yaml")
	if err := os.WriteFile(cfg, []byte(configWithTTL(densityLeaseTTL)+idleProfile), 0o600); err != nil {
		return fail(err)
	}
	w, err := e.startWorkerWith(ctx, "density", n+10, cfg)
	if err != nil {
		return fail(err)
	}
	time.Sleep(time.Second) // let the idle worker settle
	self := os.Getpid()
	idleCPU, err := cpuOf(ctx, sz.densityWindow, w.pid(), self)
	if err != nil {
		return fail(err)
	}

	var (
		mu      sync.Mutex
		started = map[string]bool{}
		ended   = map[string]protocol.Status{}
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.Prefix()+".runs.*.status", func(m runMsg) {
		term.see(m)
		if m.status == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.status.Status == protocol.StatusStarted:
			started[m.runID] = true
		case m.status.Status.Terminal():
			ended[m.runID] = *m.status
		}
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-density-%d", i)
	}
	began := time.Now()
	submitted := 0
	for {
		mu.Lock()
		up := len(started)
		mu.Unlock()
		// At most densityStarting starts at once: a worker given 1,000 at
		// once runs 1,000 mkfs and sandbox builds together, and on 2 cores
		// some take past their bounds (mkfs's 30 s).
		for ; submitted < n && submitted-up < densityStarting; submitted++ {
			if err := e.client.Submit(ctx, protocol.Job{RunID: ids[submitted], Profile: "idle"}); err != nil {
				return fail(err)
			}
		}
		mu.Lock()
		up, down := len(started), len(ended)
		var oneEnded protocol.Status
		for _, st := range ended {
			oneEnded = st
			break
		}
		mu.Unlock()
		if down > 0 {
			return fail(fmt.Errorf("run %s ended %s while idle: %s", oneEnded.RunID, oneEnded.Status, oneEnded.Reason))
		}
		if up == n {
			break
		}
		if time.Since(began) > sz.densityStartWithin {
			return fail(fmt.Errorf("only %d of %d runs started within %s", up, n, sz.densityStartWithin))
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	allUp := time.Since(began)
	e.logf("density: %d runs started after %s", n, allUp.Round(time.Millisecond))
	// "started" comes once runner-outer is ready; the agents start after.
	var lastAgent time.Time
	for _, id := range ids {
		for {
			if b, err := os.ReadFile(e.runDir(id).State()); err == nil {
				if at := phaseTimes(b)["inner-child/start-agent"]; !at.IsZero() {
					lastAgent = maxTime(lastAgent, at)
					break
				}
			}
			if time.Since(began) > sz.densityStartWithin {
				return fail(fmt.Errorf("run %s: no agent started within %s", id, sz.densityStartWithin))
			}
			time.Sleep(20 * time.Millisecond)
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
		}
	}
	agentsUp := lastAgent.Sub(began)
	time.Sleep(2 * time.Second) // past the start of the last runs and their first lease renewals

	procs, pss, err := e.runProcesses()
	if err != nil {
		return fail(err)
	}
	if procs.runs != n {
		return fail(fmt.Errorf("found the runner chains of %d runs, want %d", procs.runs, n))
	}
	runners0 := runnersCPU(procs.runners)
	busyCPU, err := cpuOf(ctx, sz.densityIdleWindow, w.pid(), self)
	if err != nil {
		return fail(err)
	}
	runnersUsed := runnersCPU(procs.runners) - runners0
	load := loadAverage()

	cancelAt := time.Now()
	for _, id := range ids {
		if _, err := e.client.Cancel(ctx, id); err != nil {
			return fail(fmt.Errorf("cancel %s: %w", id, err))
		}
	}
	statuses, err := e.waitRuns(ctx, term, ids, sz.densityStartWithin)
	if err != nil {
		return fail(err)
	}
	allCancelled := time.Since(cancelAt)
	for _, id := range slices.Sorted(maps.Keys(statuses)) {
		if st := statuses[id]; st.Status != protocol.StatusCancelled {
			return fail(fmt.Errorf("run %s ended %s, not cancelled: %s", id, st.Status, st.Reason))
		}
	}

	core := func(d, window time.Duration) float64 { return 100 * float64(d) / float64(window) }
	withRuns := func(d time.Duration) float64 { return core(d, sz.densityIdleWindow) }
	noRun := func(d time.Duration) float64 { return core(d, sz.densityWindow) }
	total := withRuns(busyCPU.worker + busyCPU.nats)
	perRun := float64(pss) / float64(n)
	e.logf("density: worker %.2f%%, NATS %.2f%% of a core (idle worker: %.2f%%, %.2f%%)",
		withRuns(busyCPU.worker), withRuns(busyCPU.nats), noRun(idleCPU.worker), noRun(idleCPU.nats))
	return []Result{{
		Row: "density", Target: target,
		Measured: fmt.Sprintf("worker + NATS %.2f%% of a core (worker %.2f%%, NATS %.2f%%; with no run %.2f%% + %.2f%%) over %s; the runs' baton processes %.3f%%; baton PSS %.2f MiB per run; %.1f baton processes per run beside the agent (%.1f processes in all); all %d started (status, at most %d starting at once) %s and their agents %s after the first submit, all cancelled %s after the first cancel; load average %s",
			total, withRuns(busyCPU.worker), withRuns(busyCPU.nats), noRun(idleCPU.worker), noRun(idleCPU.nats), sz.densityIdleWindow, withRuns(runnersUsed),
			perRun/(1<<20), float64(procs.baton)/float64(n), float64(procs.all)/float64(n), n, densityStarting, allUp.Round(100*time.Millisecond), agentsUp.Round(100*time.Millisecond), allCancelled.Round(100*time.Millisecond), load),
		Pass: verdict(total <= 2 && perRun <= 1.5*(1<<20)),
	}}
}

// densityStarting bounds the density row's runs starting at once.
const densityStarting = 32

// idleProfile is the density row's agent: it waits, printing nothing.
// No pool: the row counts what the runs cost, not the prestarted
// sandboxes an adaptive pool would keep beside them.
const idleProfile = `  idle:
    command: ["sleep", "7200"]
    timeout: 3h
    pool: 0
    network: none
`

// cpuUse is the CPU the worker and the suite's process (NATS) used in a
// window.
type cpuUse struct{ worker, nats time.Duration }

// cpuOf measures the CPU workerPID and natsPID use over d.
func cpuOf(ctx context.Context, d time.Duration, workerPID, natsPID int) (cpuUse, error) {
	w0, err := processCPU(workerPID)
	if err != nil {
		return cpuUse{}, err
	}
	n0, err := processCPU(natsPID)
	if err != nil {
		return cpuUse{}, err
	}
	select {
	case <-ctx.Done():
		return cpuUse{}, ctx.Err()
	case <-time.After(d):
	}
	w1, err := processCPU(workerPID)
	if err != nil {
		return cpuUse{}, err
	}
	n1, err := processCPU(natsPID)
	if err != nil {
		return cpuUse{}, err
	}
	return cpuUse{worker: w1 - w0, nats: n1 - n0}, nil
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return f[0] + " " + f[1] + " " + f[2]
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
