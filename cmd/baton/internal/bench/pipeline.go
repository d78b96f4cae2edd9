package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

const pipelineTarget = "≥ 0.50 × async publish, same server and size"

// pipeline: one run whose fake agent prints lines of 190 bytes as fast as
// it can (issue 31: 50,000 of them at once); events per second at a live
// subscriber (first line to last), against the unfenced JetStream
// async-publish rate of the same server and message size, measured before
// and after the run.
func (e *env) pipeline(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("pipeline", pipelineTarget, err) }
	before, err := e.asyncRate(ctx, "anchor-1", 1, sz.pipelineLines, pipelineLineSize)
	if err != nil {
		return fail(fmt.Errorf("async publish anchor: %w", err))
	}
	e.logf("pipeline: async publish %.0f msg/s", before)
	w, err := e.startWorker(ctx, "pipeline", 4)
	if err != nil {
		return fail(err)
	}
	live, err := e.pipelineRun(ctx, sz, w, []string{"bench-pipeline"}, true)
	if err != nil {
		return fail(err)
	}
	// Once more without the live subscriber: what the stream took in.
	quiet, err := e.pipelineRun(ctx, sz, w, []string{"bench-pipeline-quiet"}, false)
	if err != nil {
		return fail(err)
	}
	after, err := e.asyncRate(ctx, "anchor-2", 1, sz.pipelineLines, pipelineLineSize)
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

// pipelineMany: the aggregate of issue 31, sz.pipelineRuns runs of the
// pipeline row's agent at once on one worker; their events per second
// together at a live subscriber (the first line of any run to the last of
// any), against as many unfenced async publishers at once, each to a
// subject of its own, measured before and after.
func (e *env) pipelineMany(ctx context.Context, sz sizes) []Result {
	row := RowPipeline20 // its name, whatever the size (--quick runs fewer)
	target := fmt.Sprintf("≥ 0.50 × %d async publishers, same server and size", sz.pipelineRuns)
	fail := func(err error) []Result { return failed(row, target, err) }
	before, err := e.asyncRate(ctx, "anchor-many-1", sz.pipelineRuns, sz.pipelineLines, pipelineLineSize)
	if err != nil {
		return fail(fmt.Errorf("async publish anchor: %w", err))
	}
	e.logf("%s: %d async publishers %.0f msg/s together", row, sz.pipelineRuns, before)
	// A slot per run: all of them start at once.
	w, err := e.startWorker(ctx, row, sz.pipelineRuns)
	if err != nil {
		return fail(err)
	}
	ids := make([]string, sz.pipelineRuns)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-pipeline-many-%d", i+1)
	}
	live, err := e.pipelineRun(ctx, sz, w, ids, true)
	if err != nil {
		return fail(err)
	}
	after, err := e.asyncRate(ctx, "anchor-many-2", sz.pipelineRuns, sz.pipelineLines, pipelineLineSize)
	if err != nil {
		return fail(fmt.Errorf("async publish anchor: %w", err))
	}
	anchor := (before + after) / 2
	ratio := live.rate / anchor
	e.logf("%s: %.0f events/s together at the subscriber; async publish %.0f and %.0f msg/s; worker CPU %s per 10k events; %s",
		row, live.rate, before, after, ms(live.cpuPer10k), live.split)
	return []Result{{
		Row:    row,
		Target: target,
		Measured: fmt.Sprintf("%.0f ev/s fenced, exactly once, together (%d runs × %d lines of %d B) vs %.0f msg/s async (%.0f, %.0f) = %.2f; worker CPU %s per 10k events; CPU: %s",
			live.rate, len(ids), live.lines/len(ids), pipelineLineSize, anchor, before, after, ratio, ms(live.cpuPer10k), live.split),
		Pass: verdict(ratio >= 0.5),
	}}
}

// pipelineLineSize is the size of the pipeline rows' lines (issue 31).
const pipelineLineSize = 190

// pipelineResult is one pass of a pipeline row.
type pipelineResult struct {
	lines     int     // of every run together
	rate      float64 // lines/s: at the live subscriber, or into the stream
	cpuPer10k time.Duration
	split     string
}

// pipelineRun runs the fake agent once per id, all at once and at full
// speed, and measures the rate of every run's lines together at a live
// subscriber (the first line of any to the last of any), or, with
// subscribe false (one run only), the rate the stream stored the lines at
// (their timestamps). Every run's chain must equal its journal.
func (e *env) pipelineRun(ctx context.Context, sz sizes, w *workerProc, ids []string, subscribe bool) (pipelineResult, error) {
	if !subscribe && len(ids) != 1 {
		return pipelineResult{}, fmt.Errorf("bench: the stream's own rate is measured for one run, not %d", len(ids))
	}
	var (
		mu          sync.Mutex
		n           int
		first, last time.Time
	)
	term := newTerminal()
	see := func(m runMsg) {
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
	}
	for _, id := range ids {
		filter := e.names.RunFilter(id)
		if !subscribe {
			filter = e.names.StatusSubject(id)
		}
		sub, err := e.subscribe(filter, see)
		if err != nil {
			return pipelineResult{}, err
		}
		defer sub.Unsubscribe()
	}
	cpu0, err := processCPU(w.pid())
	if err != nil {
		return pipelineResult{}, err
	}
	split0, t0 := sampleCPU(), time.Now()
	for _, id := range ids {
		job := protocol.Job{RunID: id, Profile: "fake",
			Args: []string{"--lines", strconv.Itoa(sz.pipelineLines), "--line-size", strconv.Itoa(pipelineLineSize)}}
		if err := e.client.Submit(ctx, job); err != nil {
			return pipelineResult{}, err
		}
	}
	statuses, err := e.waitRuns(ctx, term, ids, 5*time.Minute)
	if err != nil {
		return pipelineResult{}, err
	}
	split := e.cpuSplit(split0, sampleCPU(), time.Since(t0))
	cpu1, err := processCPU(w.pid())
	if err != nil {
		return pipelineResult{}, err
	}
	res := pipelineResult{split: split}
	var stored time.Duration
	for _, id := range ids {
		if st := statuses[id]; st.Status != protocol.StatusSucceeded {
			return pipelineResult{}, fmt.Errorf("run %s ended %s: %s", id, st.Status, st.Reason)
		}
		lines, took, err := e.checkChainTimes(ctx, id)
		if err != nil {
			return pipelineResult{}, fmt.Errorf("exactly once: %w", err)
		}
		res.lines += lines
		stored = took
	}
	res.cpuPer10k = (cpu1 - cpu0) * 10000 / time.Duration(res.lines)
	if !subscribe {
		res.rate = float64(res.lines-1) / stored.Seconds()
		return res, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if n != res.lines {
		return pipelineResult{}, fmt.Errorf("the live subscriber got %d lines, the journals have %d", n, res.lines)
	}
	res.rate = float64(n-1) / last.Sub(first).Seconds()
	return res, nil
}

// asyncRate publishes n messages of size bytes from each of publishers
// publishers at once, each to a subject of its own, without headers or
// expectations, with the JetStream async publisher (at most 4,000 in
// flight each, its default) to the events stream, and returns messages
// per second together, from the first publish to the last ack.
func (e *env) asyncRate(ctx context.Context, prefix string, publishers, n, size int) (float64, error) {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	ids := make([]string, publishers)
	jss := make([]jetstream.JetStream, publishers)
	for i := range ids {
		ids[i] = prefix
		if publishers > 1 {
			ids[i] = fmt.Sprintf("%s-%d", prefix, i+1)
		}
		js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4000))
		if err != nil {
			return 0, err
		}
		jss[i] = js
	}
	errs := make([]error, publishers)
	var wg sync.WaitGroup
	start := time.Now()
	for i, js := range jss {
		wg.Go(func() { errs[i] = publishAsync(ctx, js, e.names.IngestSubject(ids[i], protocol.KindRaw), payload, n) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	// Every publish stored, or the rate means nothing.
	info, err := e.js.Stream(ctx, e.names.EventsStream())
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		stored := e.names.RawSubject(id) // what the stream stores subject as
		st, err := info.Info(ctx, jetstream.WithSubjectFilter(stored))
		if err != nil {
			return 0, err
		}
		if got := st.State.Subjects[stored]; got != uint64(n) {
			return 0, fmt.Errorf("the stream holds %d of the %d async publishes on %s", got, n, stored)
		}
	}
	return float64(publishers*n) / elapsed.Seconds(), nil
}

// publishAsync publishes payload n times on subject and waits for every ack.
func publishAsync(ctx context.Context, js jetstream.JetStream, subject string, payload []byte, n int) error {
	for range n {
		// Stalled at 4,000 in flight, it waits for acks (not 200 ms).
		if _, err := js.PublishAsync(subject, payload, jetstream.WithStallWait(time.Minute)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%d async publishes still pending after 2 minutes", js.PublishAsyncPending())
	}
}
