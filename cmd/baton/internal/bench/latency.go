package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/protocol"
)

const latencyTarget = "p99 ≤ 2 ms at 1,000 lines/s"

// latency: a stamping agent writes 200-byte lines at a steady rate; each
// line carries the wall-clock time it was written at, and the live
// subscriber subtracts it from the time it got the line. The first 200 ms
// of lines are left out (the run is still starting).
func (e *env) latency(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("latency", latencyTarget, err) }
	if _, err := e.startWorker(ctx, "latency", 4); err != nil {
		return fail(err)
	}
	const runID = "bench-latency"
	warm := uint64(sz.latencyRate * 0.2)
	var (
		mu   sync.Mutex
		lat  []time.Duration
		seen uint64
		bad  error
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindStatus {
			return
		}
		seq, t, ok := ParseStamp(m.data)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !ok:
			bad = fmt.Errorf("line %.60q is not stamped", m.data)
		case seq != seen+1:
			bad = fmt.Errorf("line %d after line %d", seq, seen)
		}
		seen = seq
		if seq > warm {
			lat = append(lat, m.at.Sub(time.Unix(0, t)))
		}
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	job := protocol.Job{RunID: runID, Profile: "stamp", Args: []string{
		"--rate", strconv.FormatFloat(sz.latencyRate, 'f', -1, 64), "--duration", sz.latencyFor.String(), "--size", "200"}}
	if err := e.client.Submit(ctx, job); err != nil {
		return fail(err)
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, sz.latencyFor+time.Minute)
	if err != nil {
		return fail(err)
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return fail(fmt.Errorf("run ended %s: %s", st.Status, st.Reason))
	}
	lines, err := e.checkChain(ctx, runID)
	if err != nil {
		return fail(fmt.Errorf("exactly once: %w", err))
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		return fail(bad)
	}
	if int(seen) != lines || len(lat) == 0 {
		return fail(fmt.Errorf("the live subscriber got %d lines, the journal has %d", seen, lines))
	}
	p50, p99, top := quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
	e.logf("latency: %d lines: p50 %s p99 %s max %s", len(lat), p50, p99, top)
	return []Result{{
		Row:      "latency",
		Target:   latencyTarget,
		Measured: fmt.Sprintf("p50 %s, p99 %s, max %s (%d lines at %.0f/s, write→subscriber)", ms(p50), ms(p99), ms(top), len(lat), sz.latencyRate),
		Pass:     verdict(p99 <= 2*time.Millisecond),
	}}
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
