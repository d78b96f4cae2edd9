package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	leases *kv.Leases
}

func setup(t *testing.T) env {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	return env{srv: s, leases: provisionLeases(t, js, provision.Options{LeaseTTL: ttl})}
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

func TestCreateHeldReleasedTakeover(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)

	a, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if a.Epoch() == 0 || a.Revision() != a.Epoch() || a.Previous() != nil {
		t.Fatalf("fresh lease: epoch %d revision %d previous %v", a.Epoch(), a.Revision(), a.Previous())
	}
	if r := a.Record(); r.State != kv.LeaseHeld || r.Worker != "w-a" || r.Epoch != a.Epoch() || r.Offset != 0 {
		t.Fatalf("fresh record %+v", r)
	}
	_, err = lease.Acquire(ctx, e.leases, "run1", holderB, ttl)
	if !errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), `"w-a"`) {
		t.Fatalf("Acquire of a held lease: %v, want ErrHeld naming w-a", err)
	}

	if err := a.Release(ctx, 1234, 56); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.leases.Get(ctx, "run1")
	want := kv.LeaseRecord{Worker: "w-a", Node: "n1", Epoch: a.Epoch(), State: kv.LeaseReleased, Offset: 1234, LastSeq: 56}
	if err != nil || got != want {
		t.Fatalf("released value %+v, %v; want %+v", got, err, want)
	}
	if err := a.Release(ctx, 1, 1); !errors.Is(err, lease.ErrEnded) {
		t.Fatalf("second Release: %v, want ErrEnded", err)
	}

	b, err := lease.Acquire(ctx, e.leases, "run1", holderB, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("epoch did not increase: %d then %d", a.Epoch(), b.Epoch())
	}
	if r := b.Record(); r.Offset != 1234 || r.LastSeq != 56 || r.State != kv.LeaseHeld || r.Worker != "w-b" || r.Epoch != b.Epoch() {
		t.Fatalf("taken-over record %+v: must resume from the released offset and sequence", r)
	}
	if p := b.Previous(); p == nil || *p != want {
		t.Fatalf("Previous = %+v, want %+v", p, want)
	}
	if _, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire of the retaken lease: %v", err)
	}
	// The run finishes: the lease goes away, and its id can be leased anew
	// with a higher epoch still.
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.leases.Get(ctx, "run1"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	if err := b.Delete(ctx); !errors.Is(err, lease.ErrEnded) {
		t.Fatalf("second Delete: %v", err)
	}
	c, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl)
	if err != nil || c.Epoch() <= b.Epoch() {
		t.Fatalf("Acquire after Delete: %v, epoch %v after %d", err, c, b.Epoch())
	}
	select {
	case <-a.Lost():
		t.Fatal("a released lease must not report Lost")
	case <-b.Lost():
		t.Fatal("a deleted lease must not report Lost")
	default:
	}
}

func TestRenewalKeepsLease(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	a, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	a.Progress(500, 42)
	a.Start(ctx)
	a.Start(ctx) // a second Start does nothing
	deadline := time.After(3500 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-a.Lost():
			t.Fatalf("lease lost while renewed: %v", a.Err())
		case <-deadline:
			done = true
		case <-time.After(200 * time.Millisecond):
			if _, err := lease.Acquire(ctx, e.leases, "run1", holderB, ttl); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("another worker acquired a renewed lease: %v", err)
			}
		}
	}
	got, rev, err := e.leases.Get(ctx, "run1")
	if err != nil {
		t.Fatal(err)
	}
	want := kv.LeaseRecord{Worker: "w-a", Node: "n1", Epoch: a.Epoch(), State: kv.LeaseHeld, Offset: 500, LastSeq: 42}
	if got != want {
		t.Fatalf("renewed value %+v, want %+v (epoch and progress written by renewals)", got, want)
	}
	// About 3 renewals per TTL over 3.5 TTLs.
	if rev != a.Revision() || rev < a.Epoch()+8 {
		t.Fatalf("revision %d (lease says %d) after 3.5 TTLs of renewal from epoch %d", rev, a.Revision(), a.Epoch())
	}
	if a.Err() != nil {
		t.Fatalf("Err = %v", a.Err())
	}
	if err := a.Delete(ctx); err != nil {
		t.Fatalf("Delete after renewals: %v", err)
	}
}

func TestStoppedLeaseExpires(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	watch, err := e.leases.Watch(ctx, "run1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	time.Sleep(ttl / 2) // at least one renewal
	a.Stop()            // the worker crashes: nobody renews
	stopped := time.Now()

	var sawPut bool
	for expired := false; !expired; {
		select {
		case ent := <-watch:
			switch ent.Op {
			case jetstream.KeyValuePut:
				sawPut = true
			case jetstream.KeyValuePurge:
				expired = true
			default:
				t.Fatalf("unexpected entry %+v", ent)
			}
		case <-time.After(5 * ttl):
			t.Fatal("no expiry marker seen within 5 TTLs")
		}
	}
	if !sawPut {
		t.Fatal("watcher saw no write of the lease before its expiry")
	}
	if d := time.Since(stopped); d < ttl/2 {
		t.Fatalf("lease expired %s after its last renewal, before the TTL", d)
	}
	b, err := lease.Acquire(ctx, e.leases, "run1", holderB, ttl)
	if err != nil {
		t.Fatalf("Acquire after expiry: %v", err)
	}
	if b.Epoch() <= a.Revision() {
		t.Fatalf("new epoch %d not above the expired lease's last revision %d", b.Epoch(), a.Revision())
	}
	select {
	case <-a.Lost():
		t.Fatal("Stop must not close Lost")
	default:
	}
	// The stopped holder comes back and tries to hand off: not its lease.
	if err := a.Release(ctx, 10, 1); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release of an expired, retaken lease: %v, want ErrLost", err)
	}
	<-a.Lost()
	if got, _, _ := e.leases.Get(ctx, "run1"); got.Worker != "w-b" || got.State != kv.LeaseHeld {
		t.Fatalf("the zombie's release touched the new lease: %+v", got)
	}
}

func TestAcquireRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	race := func(round string) *lease.Lease {
		t.Helper()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []*lease.Lease
			others  []error
		)
		for i := range 20 {
			wg.Go(func() {
				l, err := lease.Acquire(ctx, e.leases, "run1", lease.Holder{Worker: "w" + string(rune('a'+i)), Node: "n1"}, ttl)
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

func TestTakenOverHolderSeesLost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)

	// A pauses (GC, partition) longer than the TTL: its lease expires and
	// B takes it. When A runs again it knows by its own clock that its last
	// write is older than TTL - margin, before any write can fail.
	a, err := lease.Acquire(ctx, e.leases, "paused", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	var b *lease.Lease
	for waited := time.Duration(0); ; waited += 100 * time.Millisecond {
		b, err = lease.Acquire(ctx, e.leases, "paused", holderB, ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) || waited > 5*ttl {
			t.Fatalf("B could not take the expired lease: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.Start(ctx)
	select {
	case <-a.Lost():
	case <-time.After(ttl):
		t.Fatal("A did not notice that its lease was taken over")
	}
	if err := a.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "no successful renewal") {
		t.Fatalf("Err = %v", err)
	}
	if got, _, _ := e.leases.Get(ctx, "paused"); got.Worker != "w-b" {
		t.Fatalf("A's renewal overwrote B's lease: %+v", got)
	}
	if err := a.Release(ctx, 1, 1); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release after loss: %v", err)
	}

	// Somebody else writes the key of a lease being renewed (an operator
	// deleting it): the next renewal loses.
	b.Start(ctx)
	time.Sleep(ttl / 2)
	if err := e.leases.Delete(ctx, "paused", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	case <-time.After(ttl):
		t.Fatal("B did not notice that its lease was deleted")
	}
	if err := b.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "no longer current") {
		t.Fatalf("Err = %v", err)
	}
}

func TestUnrenewableLeaseIsLost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := ctxT(t)
	a, err := lease.Acquire(ctx, e.leases, "run1", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	time.Sleep(ttl / 2)
	// The server goes away: renewals fail and, TTL - TTL/6 after the last
	// one that landed, the holder must give up on its own.
	e.srv.Shutdown()
	down := time.Now()
	select {
	case <-a.Lost():
	case <-time.After(2 * ttl):
		t.Fatal("lease not lost although no renewal could succeed")
	}
	if d := time.Since(down); d > ttl-ttl/6+300*time.Millisecond {
		t.Fatalf("lost %s after the server went down: later than TTL - margin", d)
	}
	if err := a.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "no successful renewal") {
		t.Fatalf("Err = %v", err)
	}
}

// TestReplicatedTakeover runs acquisition, renewal, hand-off and expiry on
// R3 buckets, where the server reports CAS conflicts with 10164.
func TestReplicatedTakeover(t *testing.T) {
	t.Parallel()
	servers := testenv.RunCluster(t, 3)
	_, js := testenv.ConnectCluster(t, servers)
	leases := provisionLeases(t, js, provision.Options{Replicas: 3, LeaseTTL: ttl})
	ctx := ctxT(t)

	a, err := lease.Acquire(ctx, leases, "run1", holderA, ttl)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	time.Sleep(3 * ttl / 2)
	if _, err := lease.Acquire(ctx, leases, "run1", holderB, ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("R3: Acquire of a renewed lease: %v", err)
	}
	if err := a.Release(ctx, 77, 7); err != nil {
		t.Fatal(err)
	}
	b, err := lease.Acquire(ctx, leases, "run1", holderB, ttl)
	if err != nil || b.Epoch() <= a.Revision() || b.Record().Offset != 77 || b.Record().LastSeq != 7 {
		t.Fatalf("R3 takeover of released lease: %v %+v", err, b)
	}
	// B crashes; after expiry C wins and B's comeback is refused.
	b.Stop()
	var c *lease.Lease
	for waited := time.Duration(0); ; waited += 100 * time.Millisecond {
		c, err = lease.Acquire(ctx, leases, "run1", lease.Holder{Worker: "w-c", Node: "n1"}, ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) || waited > 5*ttl {
			t.Fatalf("R3: could not take the expired lease: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.Epoch() <= b.Epoch() {
		t.Fatalf("R3 epochs: %d then %d", b.Epoch(), c.Epoch())
	}
	if err := b.Release(ctx, 1, 1); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("R3: zombie release: %v", err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
