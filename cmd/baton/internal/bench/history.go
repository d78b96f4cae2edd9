package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

var historyTarget = "ratio ≤ 1.5, full bucket vs empty: worker start → ready, one reaper pass"

// historyPrefix keeps the row's buckets apart from the other rows' records,
// so "empty" is empty.
const historyPrefix = "hist"

// history: a worker's start to ready, and its reaper's first pass (the one
// that reads the whole node index), with an empty runs bucket and then with
// sz.historyRecords finished records in it. Neither may grow with history.
func (e *env) history(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("history", historyTarget, err) }
	names := protocol.MustNames(historyPrefix)
	measure := func(label string) (ready, reap time.Duration, err error) {
		var readies, reaps []time.Duration
		for i := range sz.historyReps {
			r, p, err := e.historyWorker(ctx, fmt.Sprintf("%s-%d", label, i))
			if err != nil {
				return 0, 0, err
			}
			readies, reaps = append(readies, r), append(reaps, p)
		}
		return median(readies), median(reaps), nil
	}
	ready0, reap0, err := measure("empty")
	if err != nil {
		return fail(err)
	}
	e.logf("history: empty bucket: ready %s, reaper pass %s; writing %d finished records", ms(ready0), ms(reap0), sz.historyRecords)
	if err := e.fillRecords(ctx, names, sz.historyRecords); err != nil {
		return fail(err)
	}
	ready1, reap1, err := measure("full")
	if err != nil {
		return fail(err)
	}
	rReady, rReap := float64(ready1)/float64(ready0), float64(reap1)/float64(reap0)
	return []Result{{
		Row: "history", Target: historyTarget,
		Measured: fmt.Sprintf("start → ready %s empty, %s with %d records (×%.2f); reaper pass %s empty, %s full (×%.2f); medians of %d",
			ms(ready0), ms(ready1), sz.historyRecords, rReady, ms(reap0), ms(reap1), rReap, sz.historyReps),
		Pass: verdict(rReady <= 1.5 && rReap <= 1.5),
	}}
}

// historyWorker starts a worker in this process, times its start to ready
// and its reaper's first pass (from its metrics), and stops it.
func (e *env) historyWorker(ctx context.Context, id string) (ready, reap time.Duration, err error) {
	nc, err := nats.Connect(e.srv.ClientURL(), nats.Name("baton-bench-history"))
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	dir, err := os.MkdirTemp(e.dir, "history-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	cfg := config.Default()
	cfg.Prefix, cfg.LeaseTTL = historyPrefix, time.Second // the first reaper pass after 3 s up
	reg := prometheus.NewRegistry()
	w, err := worker.New(nc, cfg, worker.WithStateDir(filepath.Join(dir, "state")), worker.WithNode("history"),
		worker.WithID(id), worker.WithBinary(e.binary), worker.WithMetrics(reg))
	if err != nil {
		return 0, 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			err = errors.Join(err, errors.New("history: worker did not stop within 15s"))
		}
	}()
	select {
	case <-w.Ready():
		ready = time.Since(start)
	case err := <-done:
		return 0, 0, fmt.Errorf("history: worker stopped before ready: %w", err)
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("history: worker not ready within 30s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n, sum := reaperPasses(reg); n > 0 {
			return ready, time.Duration(sum / float64(n) * float64(time.Second)), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, 0, errors.New("history: no reaper pass within 30s of ready")
}

// reaperPasses reads the worker's baton_reaper_pass_seconds histogram.
func reaperPasses(reg *prometheus.Registry) (uint64, float64) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "baton_reaper_pass_seconds" && len(mf.GetMetric()) > 0 {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

// fillRecords writes n finished run records, of a typical size, straight
// into the runs bucket.
func (e *env) fillRecords(ctx context.Context, names protocol.Names, n int) error {
	code := 0
	now := time.Now().UTC()
	for i := 0; i < n; i += 1000 {
		for j := i; j < min(i+1000, n); j++ {
			id := fmt.Sprintf("history-%07d", j)
			b, err := msgpack.Marshal(kv.RunRecord{
				RunID: id, State: kv.RunState(protocol.StatusSucceeded), Node: "gone-node", Worker: "gone-node-1-abcd",
				Profile: "fake", Attempt: 1, CreatedAt: now, StartedAt: now, FinishedAt: now, ExitCode: &code,
				Offset: 123456, LastSeq: uint64(j), Labels: map[string]string{"repo": "batonhq/baton", "pr": "1234"},
			})
			if err != nil {
				return err
			}
			if _, err := e.js.PublishAsync("$KV."+names.RunsBucket()+"."+id, b); err != nil {
				return err
			}
		}
		select {
		case <-e.js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("history: writing records: no acks within 30s")
		}
	}
	return nil
}
