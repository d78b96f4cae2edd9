package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/protocol"
)

// behind is the latency past which a run counts as fallen behind.
const behind = time.Second

// scaleLeaseTTL is the scale row's lease TTL: the configuration's default.
const scaleLeaseTTL = 15 * time.Second

// scaleRun is what the scale row follows of one run.
type scaleRun struct {
	seen    uint64 // last line's sequence number
	gaps    int    // lines out of order or missing
	started bool
	worst   time.Duration // in the window
}

// scale: many concurrent runs on one worker, each writing 200-byte lines
// at a steady rate. Once every run publishes, a window measures the
// worker's CPU time per 10,000 events, its RSS and goroutines per run
// (against the idle worker), and every event's latency; a run whose
// latency passed 1 s, or that lost or reordered a line, fell behind.
func (e *env) scale(ctx context.Context, sz sizes) []Result {
	target := fmt.Sprintf("%d runs × %.0f lines/s on one worker, none behind (lease TTL %s)", sz.scaleRuns, sz.scaleRate, scaleLeaseTTL)
	fail := func(err error) []Result { return failed("scale", target, err) }
	// The default lease TTL, not the suite's short one: with every core
	// busy starting sandboxes, a renewal can take longer than a second.
	cfg := filepath.Join(e.dir, "worker-scale.yaml")
	if err := os.WriteFile(cfg, []byte(configWithTTL(scaleLeaseTTL)), 0o600); err != nil {
		return fail(err)
	}
	w, err := e.startWorkerWith(ctx, "scale", sz.scaleRuns+10, cfg)
	if err != nil {
		return fail(err)
	}
	time.Sleep(time.Second) // let the idle worker settle
	idleRSS, err := processRSS(w.pid())
	if err != nil {
		return fail(err)
	}
	idleG := w.goroutines()

	var (
		mu      sync.Mutex
		runs    = map[string]*scaleRun{}
		active  int
		win     [2]time.Time // the window: lines written in it are timed, whenever they arrive
		events  int
		lat     []time.Duration
		badLine error
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.Prefix()+".runs.*.*", func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindStatus {
			return
		}
		seq, t, ok := ParseStamp(m.data)
		mu.Lock()
		defer mu.Unlock()
		r := runs[m.runID]
		if r == nil {
			return // another row's run, ending
		}
		if !ok {
			badLine = fmt.Errorf("run %s: line %.60q", m.runID, m.data)
			return
		}
		if !r.started {
			r.started = true
			active++
		}
		if seq != r.seen+1 {
			r.gaps++
		}
		r.seen = seq
		if at := time.Unix(0, t); !win[0].IsZero() && !at.Before(win[0]) && (win[1].IsZero() || at.Before(win[1])) {
			d := m.at.Sub(at)
			events++
			lat = append(lat, d)
			r.worst = max(r.worst, d)
		}
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	mu.Lock()
	for i := range sz.scaleRuns {
		runs[fmt.Sprintf("bench-scale-%d", i)] = &scaleRun{}
	}
	mu.Unlock()
	began := time.Now()
	cpuBegan := sampleCPU()
	for i := range sz.scaleRuns {
		job := protocol.Job{RunID: fmt.Sprintf("bench-scale-%d", i), Profile: "stamp", Args: []string{
			"--rate", strconv.FormatFloat(sz.scaleRate, 'f', -1, 64), "--duration", sz.scaleAgentTime.String(), "--size", "200"}}
		if err := e.client.Submit(ctx, job); err != nil {
			return fail(err)
		}
	}
	// Every run publishing.
	for {
		mu.Lock()
		n := active
		mu.Unlock()
		if n == sz.scaleRuns {
			break
		}
		if time.Since(began) > sz.scaleStartWithin {
			return fail(fmt.Errorf("only %d of %d runs published within %s (%s)", n, sz.scaleRuns,
				sz.scaleStartWithin, e.cpuSplit(cpuBegan, sampleCPU(), time.Since(began))))
		}
		time.Sleep(20 * time.Millisecond)
	}
	allUp := time.Since(began)
	e.logf("scale: %d runs publishing after %s", sz.scaleRuns, allUp.Round(time.Millisecond))
	time.Sleep(time.Second) // past the start of the last runs

	cpu0, err := processCPU(w.pid())
	if err != nil {
		return fail(err)
	}
	split0 := sampleCPU()
	mu.Lock()
	t0 := time.Now()
	win[0] = t0
	mu.Unlock()
	var rss int64
	var gor int
	for time.Since(t0) < sz.scaleWindow {
		time.Sleep(sz.scaleWindow / 10)
		if r, err := processRSS(w.pid()); err == nil {
			rss = max(rss, r)
		}
		gor = max(gor, w.goroutines())
	}
	mu.Lock()
	win[1] = time.Now()
	mu.Unlock()
	cpu1, err := processCPU(w.pid())
	if err != nil {
		return fail(err)
	}
	window := win[1].Sub(t0)
	split := e.cpuSplit(split0, sampleCPU(), window)

	// End the runs (they were started long enough to outlast the window).
	ids := slices.Collect(maps.Keys(runs))
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range work {
				_, _ = e.client.Cancel(ctx, id)
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()

	statuses, err := e.waitRuns(ctx, term, ids, 2*time.Minute)
	if err != nil {
		return fail(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if badLine != nil {
		return fail(badLine)
	}
	// Every line written in the window has arrived by now (the runs ended
	// and their chains are checked below), so a stalled pipeline shows as
	// latency, not as a quiet window that passes.
	winEvents := events
	if want := float64(sz.scaleRuns) * sz.scaleRate * window.Seconds() / 2; float64(winEvents) < want {
		return fail(fmt.Errorf("the agents wrote %d lines in the %s window, fewer than half the %.0f lines/s of %d runs (%s)",
			winEvents, window.Round(time.Millisecond), sz.scaleRate, sz.scaleRuns, split))
	}
	fell := 0
	for id, r := range runs {
		st := statuses[id]
		if st.Status != protocol.StatusCancelled && st.Status != protocol.StatusSucceeded {
			return fail(fmt.Errorf("run %s ended %s: %s", id, st.Status, st.Reason))
		}
		lines, err := e.journalLines(id)
		if err != nil {
			return fail(err)
		}
		if r.gaps > 0 || int(r.seen) != len(lines) || r.worst > behind {
			fell++
		}
	}
	cpuPer10k := time.Duration(float64(cpu1-cpu0) / float64(winEvents) * 10000)
	perRun := float64(rss-idleRSS) / float64(sz.scaleRuns)
	gPerRun := float64(gor-idleG) / float64(sz.scaleRuns)
	rate := float64(winEvents) / window.Seconds()
	e.logf("scale: %.0f events/s, worker CPU %s in %s; %s", rate, cpu1-cpu0, window.Round(time.Millisecond), split)
	return []Result{{
		Row: "scale", Target: target,
		Measured: fmt.Sprintf("%d behind; worker CPU %s per 10k events (%.0f ev/s, %.0f%% of a core), RSS %.0f KiB/run, %.1f goroutines/run, latency p99 %s max %s; all publishing after %s; CPU in the window: %s",
			fell, ms(cpuPer10k), rate, 100*float64(cpu1-cpu0)/float64(window), perRun/1024, gPerRun,
			ms(quantile(lat, 0.99)), ms(quantile(lat, 1)), allUp.Round(100*time.Millisecond), split),
		Pass: verdict(fell == 0),
	}}
}
