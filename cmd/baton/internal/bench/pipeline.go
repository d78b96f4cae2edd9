package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

const pipelineTarget = "≥ 0.50 × async publish, same server and size"

// pipeline: one run whose fake agent writes lines of 200 bytes as fast as
// it can; events per second at a live subscriber (first line to last),
// against the unfenced JetStream async-publish rate of the same server and
// message size, measured before and after the run.
func (e *env) pipeline(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("pipeline", pipelineTarget, err) }
	before, err := e.asyncRate(ctx, "anchor-1", sz.pipelineLines, pipelineLineSize)
	if err != nil {
		return fail(fmt.Errorf("async publish anchor: %w", err))
	}
	e.logf("pipeline: async publish %.0f msg/s", before)
	w, err := e.startWorker(ctx, "pipeline", 4)
	if err != nil {
		return fail(err)
	}
	live, err := e.pipelineRun(ctx, sz, w, "bench-pipeline", true)
	if err != nil {
		return fail(err)
	}
	// Once more without the live subscriber: what the stream took in.
	quiet, err := e.pipelineRun(ctx, sz, w, "bench-pipeline-quiet", false)
	if err != nil {
		return fail(err)
	}
	after, err := e.asyncRate(ctx, "anchor-2", sz.pipelineLines, pipelineLineSize)
	if err != nil {
		return fail(fmt.Errorf("async publish anchor: %w", err))
	}
	anchor := (before + after) / 2
	ratio := live.rate / anchor
	e.logf("pipeline: %.0f events/s at the subscriber, %.0f into the stream without one; async publish %.0f and %.0f msg/s; worker CPU %s per 10k events; %s",
		live.rate, quiet.rate, before, after, ms(live.cpuPer10k), live.split)
	return []Result{{
		Row:    "pipeline",
		Target: pipelineTarget,
		Measured: fmt.Sprintf("%.0f ev/s fenced, exactly once (%d lines of %d B) vs %.0f msg/s async (%.0f, %.0f) = %.2f; "+
			"without a live subscriber %.0f ev/s into the stream = %.2f; worker CPU %s per 10k events; CPU: %s",
			live.rate, live.lines, pipelineLineSize, anchor, before, after, ratio, quiet.rate, quiet.rate/anchor, ms(live.cpuPer10k), live.split),
		Pass: verdict(ratio >= 0.5),
	}}
}

// pipelineLineSize is the size of the pipeline row's lines.
const pipelineLineSize = 200

// pipelineResult is one run of the pipeline row.
type pipelineResult struct {
	lines     int
	rate      float64 // lines/s: at the live subscriber, or into the stream
	cpuPer10k time.Duration
	split     string
}

// pipelineRun runs the fake agent once, at full speed, and measures the
// rate at a live subscriber (first line to last), or, with subscribe
// false, the rate the stream stored the lines at (their timestamps).
func (e *env) pipelineRun(ctx context.Context, sz sizes, w *workerProc, runID string, subscribe bool) (pipelineResult, error) {
	var (
		mu          sync.Mutex
		n           int
		first, last time.Time
	)
	term := newTerminal()
	filter := e.names.RunFilter(runID)
	if !subscribe {
		filter = e.names.StatusSubject(runID)
	}
	sub, err := e.subscribe(filter, func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindStatus {
			return
		}
		mu.Lock()
		if n == 0 {
			first = m.at
		}
		n++
		last = m.at
		mu.Unlock()
	})
	if err != nil {
		return pipelineResult{}, err
	}
	defer sub.Unsubscribe()
	job := protocol.Job{RunID: runID, Profile: "fake",
		Args: []string{"--lines", strconv.Itoa(sz.pipelineLines), "--line-size", strconv.Itoa(pipelineLineSize)}}
	cpu0, err := processCPU(w.pid())
	if err != nil {
		return pipelineResult{}, err
	}
	split0, t0 := sampleCPU(), time.Now()
	if err := e.client.Submit(ctx, job); err != nil {
		return pipelineResult{}, err
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, 5*time.Minute)
	if err != nil {
		return pipelineResult{}, err
	}
	split := e.cpuSplit(split0, sampleCPU(), time.Since(t0))
	cpu1, err := processCPU(w.pid())
	if err != nil {
		return pipelineResult{}, err
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return pipelineResult{}, fmt.Errorf("run ended %s: %s", st.Status, st.Reason)
	}
	lines, stored, err := e.checkChainTimes(ctx, runID)
	if err != nil {
		return pipelineResult{}, fmt.Errorf("exactly once: %w", err)
	}
	res := pipelineResult{lines: lines, cpuPer10k: (cpu1 - cpu0) * 10000 / time.Duration(lines), split: split}
	if !subscribe {
		res.rate = float64(lines-1) / stored.Seconds()
		return res, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if n != lines {
		return pipelineResult{}, fmt.Errorf("the live subscriber got %d lines, the journal has %d", n, lines)
	}
	res.rate = float64(n-1) / last.Sub(first).Seconds()
	return res, nil
}

// asyncRate publishes n messages of size bytes, without headers or
// expectations, with the JetStream async publisher (at most 4,000 in
// flight, its default) to the events stream, and returns messages per
// second until the last ack.
func (e *env) asyncRate(ctx context.Context, runID string, n, size int) (float64, error) {
	js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		return 0, err
	}
	subject := e.names.IngestSubject(runID, protocol.KindRaw)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	start := time.Now()
	for range n {
		// Stalled at 4,000 in flight, it waits for acks (not 200 ms).
		if _, err := js.PublishAsync(subject, payload, jetstream.WithStallWait(time.Minute)); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, fmt.Errorf("%d async publishes still pending after 2 minutes", js.PublishAsyncPending())
	}
	elapsed := time.Since(start)
	// Every publish stored, or the rate means nothing.
	info, err := e.js.Stream(ctx, e.names.EventsStream())
	if err != nil {
		return 0, err
	}
	stored := e.names.RawSubject(runID) // what the stream stores subject as
	st, err := info.Info(ctx, jetstream.WithSubjectFilter(stored))
	if err != nil {
		return 0, err
	}
	if got := st.State.Subjects[stored]; got != uint64(n) {
		return 0, fmt.Errorf("the stream holds %d of the %d async publishes", got, n)
	}
	return float64(n) / elapsed.Seconds(), nil
}
