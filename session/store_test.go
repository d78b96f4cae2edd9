package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

type env struct {
	store *session.Store
	recs  *kv.Store[kv.SessionRecord]
	obs   jetstream.ObjectStore
	runs  map[string]*kv.RunRecord
	mu    sync.Mutex
}

func newEnv(t *testing.T, opts ...session.Option) *env {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "BATON_SESSIONS"})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "BATON_CHECKPOINTS"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{recs: kv.NewStore[kv.SessionRecord](b), obs: obs, runs: map[string]*kv.RunRecord{}}
	if e.store, err = session.NewStore(e.recs, obs, opts...); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) lookup(_ context.Context, id string) (*kv.RunRecord, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id], nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestClaimRace: of many runs claiming one session at once, exactly one
// becomes live; the others wait, and one of them starts once it ends.
func TestClaimRace(t *testing.T) {
	e := newEnv(t)
	const n = 8
	var wg sync.WaitGroup
	got := make([]session.Claimed, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = e.store.Claim(ctxT(t), "s1", "claude", fmt.Sprint("r", i), nil, e.lookup)
		})
	}
	wg.Wait()
	var live []string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim r%d: %v", i, errs[i])
		}
		if !got[i].Wait {
			live = append(live, fmt.Sprint("r", i))
		}
	}
	rec, _, err := e.store.Get(ctxT(t), "s1")
	if err != nil || len(live) != 1 || rec.Live != live[0] || rec.RunCount != 1 {
		t.Fatalf("started %q; record live %q, %d runs (%v)", live, rec.Live, rec.RunCount, err)
	}
	e.runs[live[0]] = &kv.RunRecord{State: kv.RunRunning}
	if c, err := e.store.Claim(ctxT(t), "s1", "claude", "late", nil, e.lookup); err != nil || !c.Wait || c.Why != fmt.Sprintf("session s1 has a live run, %s (running)", live[0]) {
		t.Fatalf("a claim beside the live run: %+v, %v", c, err)
	}
	if err := e.store.End(ctxT(t), "s1", live[0], false, nil, "", 0, nil); err != nil {
		t.Fatal(err)
	}
	if c, err := e.store.Claim(ctxT(t), "s1", "claude", "next", nil, e.lookup); err != nil || c.Wait || c.Record.RunCount != 2 {
		t.Fatalf("the next claim after the end: %+v, %v", c, err)
	}
	if _, err := e.store.Claim(ctxT(t), "s1", "codex", "other", nil, e.lookup); !errors.Is(err, session.ErrRefused) {
		t.Fatalf("a claim of another profile: %v", err)
	}
}

// TestClaimFinishesAnEnd: a live run whose holder died after its terminal
// status (its record says it ended, with its checkpoint) is ended by the
// next claim, its checkpoint made the head.
func TestClaimFinishesAnEnd(t *testing.T) {
	e := newEnv(t)
	if _, err := e.store.Claim(ctxT(t), "s1", "claude", "r1", map[string]string{"user": "u"}, e.lookup); err != nil {
		t.Fatal(err)
	}
	e.runs["r1"] = &kv.RunRecord{State: "paused", Checkpoint: &kv.SessionCheckpoint{Object: "s1/r1", Run: "r1", Chain: []string{"s1/r1"}}}
	c, err := e.store.Claim(ctxT(t), "s1", "claude", "r2", nil, e.lookup)
	if err != nil || c.Wait || c.Record.Live != "r2" || c.Record.Head() == nil || c.Record.Head().Object != "s1/r1" || c.Record.Labels["user"] != "u" {
		t.Fatalf("claim after an unrecorded end: %+v, %v", c, err)
	}
	// A run claimed, then refused as a duplicate, leaves no trace.
	if err := e.store.Unclaim(ctxT(t), "s1", "r2", c); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := e.store.Get(ctxT(t), "s1")
	if rec.Live != "" || slices.Contains(rec.Runs, "r2") || rec.RunCount != 1 {
		t.Fatalf("after unclaim: %+v", rec)
	}
}

// putObjects stores a data object and its manifest, as a checkpoint would.
func (e *env) putObjects(t *testing.T, objs ...string) {
	t.Helper()
	for _, o := range objs {
		for _, name := range []string{o, o + ".manifest"} {
			if _, err := e.obs.PutString(ctxT(t), name, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *env) objects(t *testing.T) []string {
	t.Helper()
	infos, err := e.obs.List(ctxT(t))
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}

// TestForkAndDelete: a fork uses its source's objects without copying;
// deleting the source keeps them (and a tombstone) while the fork lives;
// deleting the fork then removes them all.
func TestForkAndDelete(t *testing.T) {
	e := newEnv(t, session.WithKeep(2))
	e.putObjects(t, "s/r1", "s/r2")
	for i, chain := range [][]string{{"s/r1"}, {"s/r1", "s/r2"}} {
		run := fmt.Sprint("r", i+1)
		if _, err := e.store.Claim(ctxT(t), "s", "claude", run, nil, e.lookup); err != nil {
			t.Fatal(err)
		}
		if err := e.store.End(ctxT(t), "s", run, false, &kv.SessionCheckpoint{Object: chain[len(chain)-1], Run: run, Chain: chain}, "", 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Fork(ctxT(t), "s", 7, "f", nil); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("fork of a checkpoint it lacks: %v", err)
	}
	f, err := e.store.Fork(ctxT(t), "s", 2, "f", map[string]string{"user": "u2"})
	if err != nil || f.ForkedFrom.Checkpoint != 2 || f.Head().Object != "s/r2" {
		t.Fatalf("fork: %+v, %v", f, err)
	}
	if _, err := e.store.Fork(ctxT(t), "s", -1, "f", nil); !errors.Is(err, session.ErrExists) {
		t.Fatalf("a second fork onto f: %v", err)
	}
	if err := e.store.Delete(ctxT(t), "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Get(ctxT(t), "s"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a deleted session read: %v", err)
	}
	if got := e.objects(t); !slices.Equal(got, []string{"s/r1", "s/r1.manifest", "s/r2", "s/r2.manifest"}) {
		t.Fatalf("objects after the source's delete: %q", got)
	}
	// The fork makes its own checkpoint, a rebase, and keeps 2: still uses
	// the source's; a second rebase drops them.
	e.putObjects(t, "f/r3", "f/r4")
	for _, run := range []string{"r3", "r4"} {
		if _, err := e.store.Claim(ctxT(t), "f", "claude", run, nil, e.lookup); err != nil {
			t.Fatal(err)
		}
		if err := e.store.End(ctxT(t), "f", run, false, &kv.SessionCheckpoint{Object: "f/" + run, Run: run, Chain: []string{"f/" + run}}, "", 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.objects(t); !slices.Equal(got, []string{"f/r3", "f/r3.manifest", "f/r4", "f/r4.manifest"}) {
		t.Fatalf("objects once the fork let go of its source's: %q", got)
	}
	if _, _, err := e.recs.Get(ctxT(t), "s"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the source's tombstone outlived its last lend: %v", err)
	}
	e.runs["r5"] = nil
	if _, err := e.store.Claim(ctxT(t), "f", "claude", "r5", nil, e.lookup); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctxT(t), "f"); !errors.Is(err, session.ErrLive) {
		t.Fatalf("delete of a session with a live run: %v", err)
	}
	if err := e.store.End(ctxT(t), "f", "r5", false, nil, "", 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctxT(t), "f"); err != nil {
		t.Fatal(err)
	}
	if got := e.objects(t); len(got) != 0 {
		t.Fatalf("objects left after both sessions were deleted: %q", got)
	}
	if err := e.store.Delete(ctxT(t), "f"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a second delete: %v", err)
	}
}
