package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// TestOptionsRefuseBadValues: Live refuses an option given a value it
// cannot take, with an error wrapping ErrInvalidOption.
func TestOptionsRefuseBadValues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := lease.Live(ctxT(t), e.js, e.leases, holderA, ttl, lease.WithClock(nil)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Fatalf("Live with a nil clock: %v, want ErrInvalidOption", err)
	}
}

// TestLeaseOnItsClock: a liveness renews when its clock has moved TTL/3,
// and a stopped lease is released when that clock has moved a TTL, not
// before; a test moves the clock where it would wait the TTL out.
func TestLeaseOnItsClock(t *testing.T) {
	t.Parallel()
	const longTTL = time.Minute // the server's TTL of the key runs on real time
	e := setup(t)
	ctx := ctxT(t)
	m := clock.NewManual(time.Now())
	lv, err := lease.Live(ctx, e.js, e.leases, holderA, longTTL, lease.WithClock(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lv.Close(context.Background()) })
	l := acquire(t, lv, "run1")
	l.Stop()
	liveRev := func() uint64 {
		t.Helper()
		e, err := e.leases.KV().Get(ctx, lease.LiveKey(holderA.Node, holderA.Worker))
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	// Armed: the renewal, the renewal's deadline and the stopped lease's
	// release. A renewal disarms the first two, renews, and arms them again.
	armed := func(what string) {
		t.Helper()
		if !m.Sleeping(ctx, 3) {
			t.Fatalf("%s: the liveness and the stopped lease are not waiting on their clock", what)
		}
	}
	armed("at the start")
	for i := 1; i <= 2; i++ {
		before := liveRev()
		m.Advance(longTTL / 3)
		armed("after a renewal")
		if after := liveRev(); after <= before {
			t.Fatalf("renewal %d: the liveness key is still at revision %d once its clock passed TTL/3", i, after)
		}
		if rec, rev, err := e.leases.Get(ctx, "run1"); err != nil || rev != l.Epoch() || rec.State != kv.LeaseHeld {
			t.Fatalf("%v after the stop, on the lease's clock: %+v at %d, %v; want it held at its epoch %d", time.Duration(i)*longTTL/3, rec, rev, err, l.Epoch())
		}
	}
	m.Advance(longTTL / 3) // a TTL after the stop
	testenv.WaitFor(t, 10*time.Second, "the stopped lease released once its clock passed a TTL", func() bool {
		rec, _, err := e.leases.Get(ctx, "run1")
		return err == nil && rec.State == kv.LeaseReleased
	})
}
