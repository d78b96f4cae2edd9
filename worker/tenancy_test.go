package worker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// maxOverlap is the most of recs that were live at one instant, a run
// live from its record's creation to its end.
func maxOverlap(recs []kv.RunRecord) int {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, r := range recs {
		edges = append(edges, edge{r.CreatedAt, 1}, edge{r.FinishedAt, -1})
	}
	// An end before a start at the same instant: the slot is given back
	// before it is taken again.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.d, b.d)) })
	n, most := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}

// arrivals records when each run's status "started" reached a
// subscriber: the order in which the cluster started them.
type arrivals struct {
	mu    sync.Mutex
	order []string
}

func (a *arrivals) watch(t *testing.T, h *harness) {
	sub, err := h.nc.Subscribe(h.names.Prefix()+".runs.*.status", func(m *nats.Msg) {
		st, err := protocol.ParseStatus(m.Data)
		if err != nil || st.Status != protocol.StatusStarted {
			return
		}
		a.mu.Lock()
		a.order = append(a.order, st.RunID)
		a.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func (a *arrivals) started() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.order)
}

// endedRecords waits for the runs' records to be terminal, each
// succeeded, and returns them.
func (h *harness) endedRecords(ids []string, timeout time.Duration) []kv.RunRecord {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), timeout)
	defer cancel()
	st, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]kv.RunRecord, 0, len(ids))
	for _, id := range ids {
		for {
			rec, _, err := st.Get(ctx, id)
			if err == nil && rec.State.Terminal() {
				if rec.State != kv.RunState(protocol.StatusSucceeded) {
					h.t.Fatalf("run %s ended %s (%s)", id, rec.State, rec.Reason)
				}
				out = append(out, rec)
				break
			}
			if ctx.Err() != nil {
				h.t.Fatalf("run %s not ended within %s (record %+v, %v)", id, timeout, rec, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// TestKeyLimitAcrossTheCluster: two workers of two nodes, 8 slots in all,
// keyConcurrency 2: 50 jobs of key A, then 5 of key B (named by the
// tenantLabel). A never has more than 2 runs at once, and does have 2;
// B's first run starts within one slot's time of its submission, not
// behind A's backlog.
func TestKeyLimitAcrossTheCluster(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Concurrency = 4
		c.Tenancy = config.Tenancy{TenantLabel: "tenant", KeyConcurrency: config.KeyConcurrency{Default: 2}}
	}))
	h.addWorker("w2", worker.WithNode("n2"), worker.WithStateDir(testenv.StateDir(t)))
	var seen arrivals
	seen.watch(t, h)
	agent := []any{"--duration", "200ms", "--rate", "20"}
	var aIDs, bIDs []string
	for i := range 50 {
		id := fmt.Sprintf("%s-a%d", newRunID(t), i)
		aIDs = append(aIDs, id)
		h.submit(map[string]any{"runId": id, "profile": "fake", "args": agent, "concurrencyKey": "A"})
	}
	// B arrives once A's backlog is under way.
	testenv.WaitFor(t, 60*time.Second, "A's first two runs to start", func() bool { return len(seen.started()) >= 2 })
	for i := range 5 {
		id := fmt.Sprintf("%s-b%d", newRunID(t), i)
		bIDs = append(bIDs, id)
		h.submit(map[string]any{"runId": id, "profile": "fake", "args": agent, "labels": map[string]string{"tenant": "B"}})
	}
	aBefore := len(seen.started())
	a, b := h.endedRecords(aIDs, 4*time.Minute), h.endedRecords(bIDs, time.Minute)
	if n := maxOverlap(a); n != 2 {
		t.Errorf("key A had %d runs at once at most, want 2 (its limit, reached)", n)
	}
	if n := maxOverlap(b); n > 2 {
		t.Errorf("key B had %d runs at once, want at most 2", n)
	}
	for _, r := range a {
		if r.Key != "A" {
			t.Fatalf("run %s records key %q, want A", r.RunID, r.Key)
		}
	}
	if b[0].Key != "B" {
		t.Fatalf("run %s records key %q, want B (its tenant label)", b[0].RunID, b[0].Key)
	}
	// B's first run started before A had started more than two more: at
	// most one slot of each worker freed in between.
	order := seen.started()
	firstB := slices.IndexFunc(order, func(id string) bool { return slices.Contains(bIDs, id) })
	if firstB < 0 || firstB-aBefore > 2 {
		t.Fatalf("B's first run started %d runs after B's submission (A started %d before it), want at most 2: %v", firstB-aBefore, aBefore, order)
	}
	// Every slot is given back.
	testenv.WaitFor(t, 10*time.Second, "every key slot to be given back", func() bool {
		kvs, err := h.js.KeyValue(t.Context(), h.names.SlotsBucket())
		if err != nil {
			return false
		}
		keys, err := kvs.ListKeys(t.Context())
		if err != nil {
			return false
		}
		n := 0
		for range keys.Keys() {
			n++
		}
		return n == 0
	})
}

// TestQueueView: a key at its limit of one run has three jobs waiting;
// the view lists them highest priority first, then in arrival order, each
// waiting on the key's limit, and counts the worker's free slots.
func TestQueueView(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Concurrency = 4
		c.Tenancy = config.Tenancy{KeyConcurrency: config.KeyConcurrency{Default: 1}, KeyWeights: map[string]int{"A": 3}}
	}))
	long := newRunID(t)
	h.submit(map[string]any{"runId": long, "profile": "fake", "args": []any{"--duration", "2m", "--rate", "1"}, "concurrencyKey": "A"})
	h.waitStatus(long, protocol.StatusStarted)
	t.Cleanup(func() { _, _ = h.nc.Request(h.names.CancelSubject(long), nil, 5*time.Second) })
	var waiting []string
	for _, prio := range []int{1, 5, 0} {
		id := newRunID(t)
		waiting = append(waiting, id)
		h.submit(map[string]any{"runId": id, "profile": "fake", "concurrencyKey": "A", "priority": prio})
	}
	want := []string{waiting[1], waiting[2], waiting[0]} // 5, 3 (the default), 1
	var view protocol.QueueView
	testenv.WaitFor(t, 20*time.Second, "the queue view to list A's three waiting jobs", func() bool {
		m, err := h.nc.Request(h.names.ReadQueueSubject(), []byte(`{"key":"A"}`), 5*time.Second)
		if err != nil || json.Unmarshal(m.Data, &view) != nil {
			return false
		}
		return len(view.Keys) == 1 && len(view.Keys[0].Jobs) == 3
	})
	k := view.Keys[0]
	if k.Key != "A" || k.Running != 1 || k.Limit != 1 || k.Weight != 3 || k.Waiting != 3 {
		t.Fatalf("key A: %+v, want running 1 of limit 1, weight 3, 3 waiting", k)
	}
	for i, j := range k.Jobs {
		if j.RunID != want[i] || j.Position != i+1 || j.Reason != protocol.WaitKeyLimit || j.Profile != "fake" {
			t.Fatalf("job %d: %+v, want %s at position %d waiting on the key's limit", i, j, want[i], i+1)
		}
	}
	if view.Workers != 1 || view.FreeSlots != 3 {
		t.Fatalf("the view counts %d workers with %d free slots, want 1 with 3", view.Workers, view.FreeSlots)
	}
	// The run ends; the key's next job, the highest priority's, starts.
	if _, err := h.nc.Request(h.names.CancelSubject(long), nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(want[0], protocol.StatusStarted)
}

// TestFairShares: one slot, so the starts are the order the worker
// serves the keys in. A key with one job behind another's backlog starts
// next; two backlogged keys alternate; and after a reload giving A weight
// 3, A gets three slots for B's one.
func TestFairShares(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.Concurrency = 1 }))
	var seen arrivals
	seen.watch(t, h)
	keyOf := map[string]string{}
	submit := func(key string, n int) {
		for range n {
			id := newRunID(t)
			keyOf[id] = key
			// Long enough that every job of a batch is queued before
			// the run on the slot ends.
			h.submit(map[string]any{"runId": id, "profile": "fake", "args": []any{"--duration", "300ms", "--rate", "10"}, "concurrencyKey": key})
		}
	}
	// keys lists the keys of the starts from the nth on, waiting until
	// there are count of them.
	keys := func(from, count int) string {
		t.Helper()
		testenv.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d runs to start", from+count), func() bool { return len(seen.started()) >= from+count })
		out := ""
		for _, id := range seen.started()[from : from+count] {
			out += keyOf[id]
		}
		return out
	}
	submit("A", 10)
	testenv.WaitFor(t, time.Minute, "A's first run to start", func() bool { return len(seen.started()) >= 1 })
	submit("B", 3)
	// A's first run holds the slot; then B and A take turns while both
	// wait, B's three done in its first three turns.
	if got := keys(1, 6); got != "BABABA" {
		t.Fatalf("starts after B came: %s, want BABABA", got)
	}
	if got := keys(7, 6); got != "AAAAAA" {
		t.Fatalf("A's rest: %s", got)
	}
	next := 13
	h.w.Reload(config.Tenancy{KeyWeights: map[string]int{"A": 3}})
	submit("A", 12)
	submit("B", 12)
	got := keys(next, 16)
	if a := strings.Count(got, "A"); a < 11 || a > 13 {
		t.Fatalf("with A's weight 3, 16 starts went %s: A %d, want 12 (three of four)", got, a)
	}
}
