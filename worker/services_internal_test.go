package worker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// samples is how many observations h has had.
func samples(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather %v: %v", mfs, err)
	}
	return mfs[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

func newHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: prometheus.LinearBuckets(1, 1, 5)})
}

// runService runs s until the test ends, and waits for it then.
func runService(t *testing.T, s func(context.Context)) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// TestHeartbeatOnItsClock: the heartbeat beats at start and at each
// leaseTTL/3 of its clock, and a gap between two beats past twice that,
// as its clock measures it, is recorded for the node: a test moves the
// clock where the node would have to be overloaded.
func TestHeartbeatOnItsClock(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	res, err := provision.Ensure(t.Context(), js, protocol.MustNames(""), provision.Options{LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := clock.NewManual(time.Now())
	hb := &heartbeat{nodes: kv.NewStore[kv.NodeRecord](res.Nodes), node: "n1", id: "w1", capacity: func() int { return 4 },
		leaseTTL: 3 * time.Second, stateDir: t.TempDir(), gaps: newHistogram(), log: zerolog.Nop(), clock: m}
	ctx := runService(t, hb.run)
	testenv.WaitFor(t, 10*time.Second, "the beat at start", func() bool {
		_, err := res.Nodes.Get(ctx, "n1.w1")
		return err == nil
	})
	if !m.Sleeping(ctx, 1) {
		t.Fatal("the heartbeat does not tick on its clock")
	}
	// Each beat after the first observes its gap once it has landed and
	// read the clock: then the next one's gap is all the test's doing.
	beaten := func(n uint64, what string) {
		t.Helper()
		testenv.WaitFor(t, 10*time.Second, what, func() bool { return samples(t, hb.gaps) >= n })
	}
	m.Advance(time.Second)
	beaten(1, "a second beat, once its clock passed leaseTTL/3")
	m.Advance(3 * time.Second) // three beats late
	beaten(2, "a third beat, once its clock passed three times leaseTTL/3")
	testenv.WaitFor(t, 10*time.Second, "the late beat's gap recorded for the node", func() bool {
		g, ok, err := readHeartbeatGap(hb.stateDir, m.Now())
		return err == nil && ok && g.Gap == 3*time.Second && g.Worker == "w1" && g.LeaseTTL == 3*time.Second
	})
	if rec, _, err := hb.nodes.Get(ctx, "n1.w1"); err != nil || rec.Capacity != 4 || !rec.Heartbeat.Equal(m.Now()) {
		t.Fatalf("the node's entry %+v, %v: want capacity 4, at %v", rec, err, m.Now())
	}
}

// TestReaperOnItsClock: a node first seen absent has its runs marked lost
// once the reaper's clock has moved a grace past that, and its stale index
// entries dropped; a test moves the clock where it would wait for the
// grace, twice.
func TestReaperOnItsClock(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx := t.Context()
	res, err := provision.Ensure(ctx, js, protocol.MustNames(""), provision.Options{LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	nodes, runs := kv.NewStore[kv.NodeRecord](res.Nodes), kv.NewStore[kv.RunRecord](res.Runs)
	index := nodeIndex{kv: res.NodeRuns, log: zerolog.Nop()}
	if _, err := res.Nodes.Put(ctx, "n1.w1", nil); err != nil { // our own beat
		t.Fatal(err)
	}
	code := 0
	for id, rec := range map[string]kv.RunRecord{
		"running": {RunID: "running", State: kv.RunRunning, Node: "ghost"},
		"ended":   {RunID: "ended", State: kv.RunState(protocol.StatusSucceeded), Node: "ghost", ExitCode: &code},
	} {
		if _, err := runs.Create(ctx, id, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"running", "ended", "norecord"} {
		if err := index.add(ctx, "ghost", id); err != nil {
			t.Fatal(err)
		}
	}
	m := clock.NewManual(time.Now())
	lost := make(chan string, 3)
	const grace = 9 * time.Second
	rp := &reaper{nc: nc, nodes: nodes, index: index, runs: runs, node: "n1", grace: grace,
		beatFailed: func() time.Time { return time.Time{} },
		markLost:   func(_ context.Context, runID string, _ kv.RunRecord) { lost <- runID },
		passes:     newHistogram(), log: zerolog.Nop(), clock: m, absentSince: map[string]time.Time{}}
	ctx = runService(t, rp.run)
	if !m.Sleeping(ctx, 1) {
		t.Fatal("the reaper does not tick on its clock")
	}
	passed := func(n uint64, what string) {
		t.Helper()
		testenv.WaitFor(t, 10*time.Second, what, func() bool { return samples(t, rp.passes) >= n })
	}
	m.Advance(grace) // heartbeating for a grace: the first pass reads the whole index
	passed(1, "the first pass, a grace after the reaper started")
	if len(lost) != 0 {
		t.Fatalf("run %s marked lost as soon as its node was seen absent", <-lost)
	}
	m.Advance(grace)
	passed(2, "a pass a grace after the ghost node was seen absent")
	select {
	case got := <-lost:
		if got != "running" || len(lost) != 0 {
			t.Fatalf("marked lost: %s and %d more, want the ghost node's running run alone", got, len(lost))
		}
	default:
		t.Fatal("no run marked lost a grace after its node was seen absent")
	}
	keys, err := index.list(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// markLost here marks nothing: the lost run's entry is the worker's to drop.
	if want := []string{protocol.NodeRunKey("ghost", "running")}; !slices.Equal(keys, want) {
		t.Fatalf("the node index holds %v after the reaper, want %v", keys, want)
	}
}
