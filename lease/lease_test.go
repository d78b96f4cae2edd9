package lease_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
)

const ttl = time.Second

var (
	holderA = lease.Holder{Worker: "w-a", Node: "n1"}
	holderB = lease.Holder{Worker: "w-b", Node: "n1"}
)

type env struct {
	srv    *server.Server
	url    string
	js     jetstream.JetStream
	leases *kv.Leases
}

func setup(t *testing.T) env {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	return env{srv: s, url: s.ClientURL(), js: js, leases: provisionLeases(t, js, provision.Options{LeaseTTL: ttl})}
}

func provisionLeases(t *testing.T, js jetstream.JetStream, o provision.Options) *kv.Leases {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := provision.Ensure(ctx, js, protocol.MustNames(""), o)
	if err != nil {
		t.Fatal(err)
	}
	return kv.NewStore[kv.LeaseRecord](res.Leases)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// live opens h's liveness on the test's connection.
func (e env) live(t *testing.T, h lease.Holder) *lease.Liveness {
	t.Helper()
	lv, err := lease.Live(ctxT(t), e.js, e.leases, h, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lv.Close(context.Background()) })
	return lv
}

// liveCut opens h's liveness on a connection of its own and returns the
// function that cuts it: the worker then stalls as far as NATS can tell
// (a partition, a long pause), and its liveness key expires.
func (e env) liveCut(t *testing.T, url string, h lease.Holder) (*lease.Liveness, func()) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	return liveOn(t, nc, h, ttl), nc.Close
}

// liveOn opens h's liveness with lease TTL d over nc, which it closes when
// the test ends.
func liveOn(t *testing.T, nc *nats.Conn, h lease.Holder, d time.Duration, opts ...lease.Option) *lease.Liveness {
	t.Helper()
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store, err := kv.Open[kv.LeaseRecord](ctxT(t), js, protocol.MustNames("").LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	lv, err := lease.Live(ctxT(t), js, store, h, d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lv.Close(context.Background()) })
	return lv
}

func acquire(t *testing.T, lv *lease.Liveness, run string) *lease.Lease {
	t.Helper()
	l, err := lv.Acquire(ctxT(t), run)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func lostWithin(t *testing.T, l *lease.Lease, d time.Duration, what string) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(d):
		t.Fatalf("%s: lease not lost within %s", what, d)
	}
}

// TestAcquire takes run1's lease as B after each way a lease can be left
// by A (or by a worker of the older design, which renewed each lease).
func TestAcquire(t *testing.T) {
	t.Parallel()
	type outcome struct {
		held     bool   // ErrHeld
		offset   int64  // inherited from a released lease
		lastSeq  uint64 // likewise
		previous string // state of the lease taken over, "" for a Create
	}
	cases := []struct {
		name string
		// prepare leaves run1's key as the case needs it and returns the
		// epoch B's must exceed.
		prepare func(t *testing.T, e env) uint64
		want    outcome
	}{
		{"no lease", func(*testing.T, env) uint64 { return 0 }, outcome{}},
		{"held, holder live", func(t *testing.T, e env) uint64 {
			return acquire(t, e.live(t, holderA), "run1").Epoch()
		}, outcome{held: true}},
		{"released", func(t *testing.T, e env) uint64 {
			a := acquire(t, e.live(t, holderA), "run1")
			if err := a.Release(ctxT(t), 1234, 56); err != nil {
				t.Fatal(err)
			}
			return a.Epoch()
		}, outcome{offset: 1234, lastSeq: 56, previous: "released"}},
		{"held, holder's liveness expired", func(t *testing.T, e env) uint64 {
			lv, cut := e.liveCut(t, e.url, holderA)
			a := acquire(t, lv, "run1")
			w, err := e.leases.WatchWith(ctxT(t), lease.LiveKeys("n1"), jetstream.UpdatesOnly())
			if err != nil {
				t.Fatal(err)
			}
			cut()
			cutAt := time.Now()
			// The expiry leaves a marker, which recovery reacts to: within
			// the TTL and a second of the holder's last renewal.
			for {
				select {
				case ent := <-w:
					if ent.Op != jetstream.KeyValuePurge {
						continue
					}
					if d := time.Since(cutAt); d > ttl+time.Second {
						t.Fatalf("expiry marker %s after the cut, later than TTL + 1 s", d)
					}
					lostWithin(t, a, ttl, "the stalled holder")
					return a.Epoch()
				case <-time.After(3 * ttl):
					t.Fatal("no expiry marker of the stalled holder's liveness key")
				}
			}
		}, outcome{previous: "held"}},
		{"held, holder's liveness closed", func(t *testing.T, e env) uint64 {
			lv := e.live(t, holderA)
			a := acquire(t, lv, "run1")
			if err := lv.Close(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			lostWithin(t, a, time.Second, "a closed liveness")
			return a.Epoch()
		}, outcome{previous: "held"}},
		{"held, its worker restarted under the same id", func(t *testing.T, e env) uint64 {
			lv, cut := e.liveCut(t, e.url, holderA)
			a := acquire(t, lv, "run1")
			cut() // killed; it comes back at once
			started := time.Now()
			again := e.live(t, holderA)
			if d := time.Since(started); d > ttl+500*time.Millisecond {
				t.Fatalf("the restarted worker waited %s for its old key", d)
			}
			if again.Session() == 0 {
				t.Fatal("no session")
			}
			return a.Epoch()
		}, outcome{previous: "held"}},
		{"held by an older worker, renewed", func(t *testing.T, e env) uint64 {
			rev, err := e.leases.Create(ctxT(t), "run1", kv.LeaseRecord{Worker: "old", Node: "n1", State: kv.LeaseHeld})
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}, outcome{held: true}},
		{"held by an older worker, not renewed for a TTL", func(t *testing.T, e env) uint64 {
			rev, err := e.leases.Create(ctxT(t), "run1", kv.LeaseRecord{Worker: "old", Node: "n1", State: kv.LeaseHeld})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(ttl + 100*time.Millisecond)
			return rev
		}, outcome{previous: "held"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := ctxT(t)
			before := tc.prepare(t, e)
			lvb := e.live(t, holderB)
			b, err := lvb.Acquire(ctx, "run1")
			if tc.want.held {
				if !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("Acquire: %v, want ErrHeld", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Epoch() <= before || b.Revision() != b.Epoch() {
				t.Fatalf("epoch %d (revision %d) after %d", b.Epoch(), b.Revision(), before)
			}
			want := kv.LeaseRecord{Worker: "w-b", Node: "n1", Epoch: b.Epoch(), State: kv.LeaseHeld, Offset: tc.want.offset, LastSeq: tc.want.lastSeq, Session: lvb.Session()}
			if r := b.Record(); r != want {
				t.Fatalf("record %+v, want %+v", r, want)
			}
			if p := b.Previous(); tc.want.previous == "" && p != nil || tc.want.previous != "" && (p == nil || string(p.State) != tc.want.previous) {
				t.Fatalf("Previous = %+v, want state %q", p, tc.want.previous)
			}
			// Stored as taken, not renewed: the epoch is the entry's revision.
			got, rev, err := e.leases.Get(ctx, "run1")
			if want.Epoch = 0; err != nil || got != want || rev != b.Epoch() {
				t.Fatalf("stored %+v at %d, %v; want %+v at %d", got, rev, err, want, b.Epoch())
			}
			// B holds it now: nobody else takes it, B itself neither.
			if _, err := e.live(t, lease.Holder{Worker: "w-c", Node: "n1"}).Acquire(ctx, "run1"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("a third worker's Acquire: %v, want ErrHeld", err)
			}
			if _, err := lvb.Acquire(ctx, "run1"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("the holder's second Acquire: %v, want ErrHeld", err)
			}
		})
	}
}

// TestIdleLeasesCostNoWrite: while its worker lives, a lease is never
// written and never taken; the worker's one liveness key is what is
// renewed, about three times a TTL.
func TestIdleLeasesCostNoWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	lv := e.live(t, holderA)
	held := map[string]*lease.Lease{}
	for i := range 20 {
		id := fmt.Sprintf("run%d", i)
		held[id] = acquire(t, lv, id)
	}
	writes, err := e.leases.WatchFiltered(ctx, []string{"*", lease.LiveKey("n1", "w-a")}, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	lvb := e.live(t, holderB)
	renewals := 0
	deadline := time.After(3500 * time.Millisecond)
	probe := time.NewTicker(300 * time.Millisecond)
	defer probe.Stop()
	for done := false; !done; {
		select {
		case <-held["run0"].Lost():
			t.Fatalf("lease lost while its worker lives: %v", held["run0"].Err())
		case ent := <-writes:
			if ent.Key != lease.LiveKey("n1", "w-a") {
				t.Fatalf("an idle run's lease was written: %+v", ent)
			}
			renewals++
		case <-probe.C:
			if _, err := lvb.Acquire(ctx, "run7"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("another worker acquired a live worker's lease: %v", err)
			}
		case <-deadline:
			done = true
		}
	}
	if renewals < 8 || renewals > 13 {
		t.Fatalf("%d liveness renewals in 3.5 TTLs, want about 10", renewals)
	}
	for id, l := range held {
		if _, rev, err := e.leases.Get(ctx, id); err != nil || rev != l.Epoch() {
			t.Fatalf("%s: revision %d, %v; want its epoch %d", id, rev, err, l.Epoch())
		}
	}
}

// TestLivenessLossLosesEveryLease: a worker whose liveness key cannot be
// renewed loses every lease of the session at once, on its own clock,
// before its key can expire; one whose key was removed learns it at the
// next renewal, and renews in a new session whose leases are new ones.
func TestLivenessLossLosesEveryLease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// fail makes A's renewals fail; within is how soon after it every
		// lease must be lost, and why names the cause.
		fail    func(t *testing.T, e env)
		within  time.Duration
		why     string
		reopens bool
	}{
		{"server gone", func(t *testing.T, e env) { e.srv.Shutdown() },
			ttl - ttl/6 + 300*time.Millisecond, "no successful renewal", false},
		{"key removed", func(t *testing.T, e env) {
			if err := e.leases.Delete(ctxT(t), lease.LiveKey("n1", "w-a"), 0); err != nil {
				t.Fatal(err)
			}
		}, ttl/3 + 300*time.Millisecond, "no longer current", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			lv := e.live(t, holderA)
			first := lv.Session()
			var held []*lease.Lease
			for i := range 5 {
				held = append(held, acquire(t, lv, fmt.Sprintf("run%d", i)))
			}
			time.Sleep(ttl / 2)
			tc.fail(t, e)
			failed := time.Now()
			for _, l := range held {
				lostWithin(t, l, tc.within-time.Since(failed), tc.name)
				if err := l.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("Err = %v, want ErrLost saying %q", err, tc.why)
				}
			}
			if !tc.reopens {
				return
			}
			ctx := ctxT(t)
			if err := held[0].Release(ctx, 1, 1); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("Release of a lease of the lost session: %v", err)
			}
			testenv.WaitFor(t, 2*ttl, "a new session", func() bool { return lv.Session() != 0 })
			if lv.Session() == first {
				t.Fatal("the new session has the lost one's id")
			}
			// The lost session's leases are free: this worker takes them
			// again, under new epochs, as any other worker could.
			again := acquire(t, lv, "run0")
			if again.Epoch() <= held[0].Epoch() {
				t.Fatalf("epoch %d after %d", again.Epoch(), held[0].Epoch())
			}
			if _, err := e.live(t, holderB).Acquire(ctx, "run0"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("Acquire of a lease of the new session: %v", err)
			}
		})
	}
}

// TestEnd releases, deletes and stops leases, and checks that each
// compare-and-set refuses a holder whose lease was taken over.
func TestEnd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// end ends a (held by A, its worker live unless taken) and says
		// what the key must then hold: nil for no value.
		end  func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord
		lost bool // a.Lost() must be closed after
	}{
		{"release", func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord {
			if err := a.Release(ctxT(t), 1234, 56); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctxT(t), 1, 1); !errors.Is(err, lease.ErrEnded) {
				t.Fatalf("second Release: %v, want ErrEnded", err)
			}
			return &kv.LeaseRecord{Worker: "w-a", Node: "n1", Epoch: a.Epoch(), State: kv.LeaseReleased, Offset: 1234, LastSeq: 56}
		}, false},
		{"delete", func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord {
			if err := a.Delete(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if err := a.Delete(ctxT(t)); !errors.Is(err, lease.ErrEnded) {
				t.Fatalf("second Delete: %v, want ErrEnded", err)
			}
			return nil
		}, false},
		{"stop", func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord {
			a.Stop()
			if _, rev, _ := e.leases.Get(ctxT(t), "run1"); rev != a.Epoch() {
				t.Fatalf("a stopped lease was written at once (revision %d)", rev)
			}
			testenv.WaitFor(t, 2*ttl, "the stopped lease released", func() bool {
				got, _, _ := e.leases.Get(ctxT(t), "run1")
				return got.State == kv.LeaseReleased
			})
			return &kv.LeaseRecord{Worker: "w-a", Node: "n1", Epoch: a.Epoch(), State: kv.LeaseReleased}
		}, false},
		{"release after a takeover", func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord {
			b := takeOver(t, e, a)
			if err := a.Release(ctxT(t), 10, 1); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("zombie Release: %v, want ErrLost", err)
			}
			return &kv.LeaseRecord{Worker: "w-b", Node: "n1", State: kv.LeaseHeld, Session: b}
		}, true},
		{"delete after a takeover", func(t *testing.T, e env, a *lease.Lease) *kv.LeaseRecord {
			b := takeOver(t, e, a)
			if err := a.Delete(ctxT(t)); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("zombie Delete: %v, want ErrLost", err)
			}
			return &kv.LeaseRecord{Worker: "w-b", Node: "n1", State: kv.LeaseHeld, Session: b}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			a := acquire(t, e.live(t, holderA), "run1")
			want := tc.end(t, e, a)
			got, _, err := e.leases.Get(ctxT(t), "run1")
			switch {
			case want == nil && !errors.Is(err, kv.ErrNotFound):
				t.Fatalf("after the end: %+v, %v; want no value", got, err)
			case want != nil && (err != nil || got != *want):
				t.Fatalf("after the end: %+v, %v; want %+v", got, err, *want)
			}
			select {
			case <-a.Lost():
				if !tc.lost {
					t.Fatalf("Lost closed: %v", a.Err())
				}
			default:
				if tc.lost {
					t.Fatal("Lost not closed")
				}
			}
			if want == nil || want.State == kv.LeaseReleased {
				// The key can be leased anew, under a higher epoch.
				if c := acquire(t, e.live(t, lease.Holder{Worker: "w-c", Node: "n1"}), "run1"); c.Epoch() <= a.Epoch() {
					t.Fatalf("epoch %d after %d", c.Epoch(), a.Epoch())
				}
			}
		})
	}
}

// takeOver has B take run1 from a, whose holder's liveness is made to look
// gone as a successor sees it: the key of a's session removed. It returns
// B's session.
func takeOver(t *testing.T, e env, a *lease.Lease) uint64 {
	t.Helper()
	if err := e.leases.Delete(ctxT(t), lease.LiveKey("n1", "w-a"), 0); err != nil {
		t.Fatal(err)
	}
	lvb := e.live(t, holderB)
	b := acquire(t, lvb, "run1")
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("epoch %d after %d", b.Epoch(), a.Epoch())
	}
	return lvb.Session()
}

func TestAcquireRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	var lives []*lease.Liveness
	for i := range 20 {
		lives = append(lives, e.live(t, lease.Holder{Worker: fmt.Sprintf("w%d", i), Node: "n1"}))
	}
	race := func(round string) *lease.Lease {
		t.Helper()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []*lease.Lease
			others  []error
		)
		for _, lv := range lives {
			wg.Go(func() {
				l, err := lv.Acquire(ctx, "run1")
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					winners = append(winners, l)
				} else {
					others = append(others, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%s: %d winners, want exactly 1", round, len(winners))
		}
		for _, err := range others {
			if !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("%s: loser got %v, want ErrHeld", round, err)
			}
		}
		got, rev, err := e.leases.Get(ctx, "run1")
		if err != nil || got.Worker != winners[0].Record().Worker || rev != winners[0].Epoch() {
			t.Fatalf("%s: stored %+v at %d, winner %+v", round, got, rev, winners[0].Record())
		}
		return winners[0]
	}
	first := race("create")
	if err := first.Release(ctx, 99, 9); err != nil {
		t.Fatal(err)
	}
	second := race("take over released")
	if second.Epoch() <= first.Epoch() || second.Record().Offset != 99 {
		t.Fatalf("takeover: epoch %d after %d, record %+v", second.Epoch(), first.Epoch(), second.Record())
	}
}

// TestReplicatedTakeover runs acquisition, liveness, hand-off and expiry
// on R3 buckets, where the server reports CAS conflicts with 10164 and
// reads may come from a lagging replica.
func TestReplicatedTakeover(t *testing.T) {
	t.Parallel()
	servers := testenv.RunCluster(t, 3)
	_, js := testenv.ConnectCluster(t, servers)
	e := env{js: js, leases: provisionLeases(t, js, provision.Options{Replicas: 3, LeaseTTL: ttl})}
	ctx := ctxT(t)

	a := acquire(t, e.live(t, holderA), "run1")
	time.Sleep(3 * ttl / 2)
	lvb, cutB := e.liveCut(t, testenv.ClusterURL(servers), holderB)
	if _, err := lvb.Acquire(ctx, "run1"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("R3: Acquire of a live worker's lease: %v", err)
	}
	if err := a.Release(ctx, 77, 7); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, lvb, "run1")
	if b.Epoch() <= a.Revision() || b.Record().Offset != 77 || b.Record().LastSeq != 7 {
		t.Fatalf("R3 takeover of released lease: %+v", b.Record())
	}
	// B stalls; once its liveness expires C wins and B's comeback is refused.
	cutB()
	lvc := e.live(t, lease.Holder{Worker: "w-c", Node: "n1"})
	var c *lease.Lease
	for waited := time.Duration(0); ; waited += 100 * time.Millisecond {
		var err error
		if c, err = lvc.Acquire(ctx, "run1"); err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) || waited > 5*ttl {
			t.Fatalf("R3: could not take the stalled worker's lease: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.Epoch() <= b.Epoch() {
		t.Fatalf("R3 epochs: %d then %d", b.Epoch(), c.Epoch())
	}
	lostWithin(t, b, ttl, "R3 stalled holder")
	if err := b.Release(ctx, 1, 1); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("R3: zombie release: %v", err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestObserve feeds a watch of the bucket to the holder's liveness, as the
// worker does: a write of another writer on a held lease's key loses it at
// once; the holder's own writes do not.
func TestObserve(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		write func(t *testing.T, e env, a *lease.Lease)
		lost  bool
	}{
		{"nothing", func(*testing.T, env, *lease.Lease) {}, false},
		{"own release", func(t *testing.T, e env, a *lease.Lease) {
			if err := a.Release(ctxT(t), 5, 1); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"own delete", func(t *testing.T, e env, a *lease.Lease) {
			if err := a.Delete(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"deleted by another", func(t *testing.T, e env, a *lease.Lease) {
			if err := e.leases.Delete(ctxT(t), "run1", 0); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"overwritten by another", func(t *testing.T, e env, a *lease.Lease) {
			if _, err := e.leases.Update(ctxT(t), "run1", kv.LeaseRecord{Worker: "op", State: kv.LeaseReleased}, a.Epoch()); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := ctxT(t)
			lv := e.live(t, holderA)
			seen := make(chan uint64, 16)
			ch, err := e.leases.WatchWith(ctx, "*", jetstream.UpdatesOnly())
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for ent := range ch {
					lv.Observe(ent.Key, ent.Revision)
					seen <- ent.Revision
				}
			}()
			a := acquire(t, lv, "run1")
			if rev := <-seen; rev != a.Epoch() {
				t.Fatalf("watch saw revision %d, want the acquire's %d", rev, a.Epoch())
			}
			tc.write(t, e, a)
			if tc.name != "nothing" {
				// Observe has run on the write once the watch passes it on.
				select {
				case rev := <-seen:
					if rev <= a.Epoch() {
						t.Fatalf("watch saw revision %d after %d", rev, a.Epoch())
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the watch did not see the write")
				}
			}
			select {
			case <-a.Lost():
				if !tc.lost {
					t.Fatalf("lost: %v", a.Err())
				}
				if err := a.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "another writer") {
					t.Fatalf("Err = %v", err)
				}
			default:
				if tc.lost {
					t.Fatal("not lost after another writer changed the key")
				}
			}
		})
	}
}

// TestOutageReopensAtOnce: a worker cut off from NATS past TTL − TTL/6
// loses its session and every lease of it; once NATS answers again it
// opens a new session by overwriting its key, which never expires in
// between (the chaos soak found workers unable to take any run for up to a
// TTL after each NATS restart while they waited their own key out). The
// lost session's leases are free to take at once. Each session is told to
// WithOnSession (a worker's record names it, for its siblings).
func TestOutageReopensAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const outTTL = 4 * time.Second
	p := newPausableProxy(t, e.srv.Addr().String())
	nc, err := nats.Connect("nats://"+p.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var mu sync.Mutex
	var told []uint64
	lv := liveOn(t, nc, holderA, outTTL, lease.WithOnSession(func(id uint64) {
		mu.Lock()
		told = append(told, id)
		mu.Unlock()
	}))
	first := lv.Session()
	held := acquire(t, lv, "run1")
	// Watched from the test's own connection: an expiry of the key
	// would show as a purge or delete.
	w, err := e.leases.KV().Watch(ctx, lease.LiveKey(holderA.Node, holderA.Worker), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p.pause()
	lostWithin(t, held, outTTL, "an outage")
	p.resume()
	testenv.WaitFor(t, outTTL, "a new session", func() bool { s := lv.Session(); return s != 0 && s != first })
	mu.Lock()
	if want := []uint64{first, lv.Session()}; !slices.Equal(told, want) {
		t.Errorf("sessions told %v, want %v", told, want)
	}
	mu.Unlock()
	for {
		select {
		case ent := <-w.Updates():
			if ent != nil && ent.Operation() != jetstream.KeyValuePut {
				t.Fatalf("the liveness key was %v between the sessions: the new one waited the old key out", ent.Operation())
			}
			continue
		default:
		}
		break
	}
	// Another worker takes the lost session's lease at once.
	lvb := e.live(t, holderB)
	b := acquire(t, lvb, "run1")
	if b.Epoch() <= held.Epoch() {
		t.Fatalf("epoch %d after %d", b.Epoch(), held.Epoch())
	}
}

// pausableProxy forwards TCP to a server until paused: then it drops
// every connection and refuses new ones, as a network outage would.
type pausableProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	paused bool
	conns  []net.Conn
}

func newPausableProxy(t *testing.T, target string) *pausableProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.pause() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if paused {
				c.Close()
				continue
			}
			u, err := net.DialTimeout("tcp", target, 2*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *pausableProxy) addr() string { return p.l.Addr().String() }

func (p *pausableProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *pausableProxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// TestConcurrentAcquireInOneWorker: two attach jobs of one run handled at
// once by the same worker (a released lease's watch event and a scan) must
// not both get the lease. Before Acquire marked the runs it is taking, the
// second read the first's write, not registered yet, as a dead session's,
// took it over, and the first's lease was lost to that write (seen in CI by
// TestConsoleInBrowser as a freshly attached lease lost through Observe).
func TestConcurrentAcquireInOneWorker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	for _, released := range []bool{false, true} {
		t.Run(fmt.Sprintf("released=%v", released), func(t *testing.T) {
			lv := e.live(t, holderA)
			run := fmt.Sprintf("run-%v", released)
			if released { // taken over from a hand-off, not created
				if err := acquire(t, lv, run).Release(ctx, 7, 3); err != nil {
					t.Fatal(err)
				}
			}
			// The first write to land waits, unregistered, until the
			// second Acquire has returned: its reply is late.
			second := make(chan struct{})
			var waited atomic.Bool
			lv.SetBeforeRegister(func(string) {
				if !waited.Swap(true) {
					select {
					case <-second:
					case <-time.After(10 * time.Second):
						t.Error("the second acquire did not return within 10 s")
					}
				}
			})
			type result struct {
				l   *lease.Lease
				err error
			}
			first := make(chan result, 1)
			go func() {
				l, err := lv.Acquire(ctx, run)
				first <- result{l, err}
			}()
			// Let the first take the key before the second looks.
			testenv.WaitFor(t, 5*time.Second, "the first acquire's write", func() bool {
				cur, _, err := e.leases.Get(ctx, run)
				return err == nil && cur.State == kv.LeaseHeld
			})
			l2, err2 := lv.Acquire(ctx, run)
			close(second)
			r1 := <-first
			if r1.err != nil {
				t.Fatalf("first acquire: %v", r1.err)
			}
			if err2 == nil {
				t.Fatalf("both acquires of %s in one worker won (epochs %d and %d)", run, r1.l.Epoch(), l2.Epoch())
			}
			if !errors.Is(err2, lease.ErrHeld) {
				t.Fatalf("second acquire: %v, want ErrHeld", err2)
			}
			cur, rev, err := e.leases.Get(ctx, run)
			if err != nil || rev != r1.l.Epoch() || cur.Session != lv.Session() {
				t.Fatalf("key %+v at %d (%v), want the first's epoch %d", cur, rev, err, r1.l.Epoch())
			}
			if released && (r1.l.Record().Offset != 7 || r1.l.Record().LastSeq != 3) {
				t.Fatalf("taken over from the release: %+v", r1.l.Record())
			}
		})
	}
}

// TestEndDead: a worker ends the liveness of another whose process it saw
// exit, only for the session it names, and the dead worker's leases are
// free at once, not a TTL later.
func TestEndDead(t *testing.T) {
	e := setup(t)
	const long = 30 * time.Second // no expiry within the test
	ncA, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	a := liveOn(t, ncA, holderA, long)
	acquire(t, a, "run1")
	dead := a.Session()
	ncA.Close() // A dies: its key stays until its TTL
	ncB, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	b := liveOn(t, ncB, holderB, long)
	ctx := ctxT(t)
	if _, err := b.Acquire(ctx, "run1"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire of a dead worker's lease before its liveness ends = %v, want ErrHeld", err)
	}
	if ended, err := b.EndDead(ctx, holderA.Node, holderA.Worker, dead+1); ended || err != nil {
		t.Fatalf("EndDead of another session = %v, %v; want false, nil", ended, err)
	}
	if _, err := b.EndDead(ctx, holderB.Node, holderB.Worker, b.Session()); err == nil {
		t.Fatal("EndDead of its own liveness succeeded")
	}
	if _, err := b.EndDead(ctx, "n1", "../x", dead); err == nil {
		t.Fatal("EndDead of a key no worker can have succeeded")
	}
	began := time.Now()
	if ended, err := b.EndDead(ctx, holderA.Node, holderA.Worker, dead); !ended || err != nil {
		t.Fatalf("EndDead of the dead session = %v, %v; want true, nil", ended, err)
	}
	acquire(t, b, "run1")
	if took := time.Since(began); took > long/3 {
		t.Errorf("lease taken %v after EndDead", took)
	}
	if ended, err := b.EndDead(ctx, holderA.Node, holderA.Worker, dead); ended || err != nil {
		t.Fatalf("EndDead of an ended session = %v, %v; want false, nil", ended, err)
	}
}
