package worker_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// TestFullEventsStreamStallsRun: a run whose events stream fills up (at
// eventsMaxBytes, so it refuses new events) is neither failed nor loses a
// line: its publishing waits, the worker's metric says so, and once space
// is freed the run goes on and ends succeeded with its chain equal to its
// journal byte for byte.
func TestFullEventsStreamStallsRun(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.EventsMaxBytes = 4 << 20 }))
	h.stops["w1"]()
	reg := prometheus.NewRegistry()
	h.addWorker("w2", worker.WithMetrics(reg))
	waiting := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "baton_runs_waiting_for_storage" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no baton_runs_waiting_for_storage metric")
		return 0
	}
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "300", "--rate", "30", "--raw-every", "5", "--seed", "4"}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	events, err := h.js.Stream(ctx, h.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the run's first lines", func() bool {
		info, err := events.Info(ctx, jetstream.WithSubjectFilter(h.names.RunFilter(id)))
		return err == nil && info.State.Msgs > 10
	})
	// Another run's events take every byte left.
	other := h.names.IngestSubject("other", protocol.KindRaw)
	for _, size := range []int{64 << 10, 1 << 10, 16, 1} {
		for i := 0; ; i++ {
			_, err := h.js.Publish(ctx, other, bytes.Repeat([]byte("f"), size))
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == 10077 {
				break
			}
			if err != nil || i > 10000 {
				t.Fatalf("filling the events stream with %d bytes, publish %d: %v", size, i, err)
			}
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the run's publishing to wait for room", func() bool { return waiting() == 1 })
	time.Sleep(time.Second)
	if rec := h.record(id); rec.State.Terminal() {
		t.Fatalf("the run ended while the stream was full: %+v", rec)
	}
	if err := events.Purge(ctx, jetstream.WithPurgeSubject(h.names.RunFilter("other"))); err != nil {
		t.Fatal(err)
	}
	msgs := h.chain(id, time.Minute)
	if st := statuses(t, msgs); st[len(st)-1].Status != protocol.StatusSucceeded {
		t.Fatalf("terminal status %+v", st[len(st)-1])
	}
	h.assertChainMatchesJournal(id, msgs)
	if w := waiting(); w != 0 {
		t.Fatalf("%v runs still waiting for storage after the run ended", w)
	}
}
