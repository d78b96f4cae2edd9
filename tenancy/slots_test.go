package tenancy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/tenancy"
)

// slotsOf starts n workers' views of one slots bucket on a real server.
func slotsOf(t *testing.T, n int, shorten bool) (jetstream.KeyValue, []*tenancy.Slots) {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "SLOTS", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var out []*tenancy.Slots
	for i := range n {
		sl := tenancy.NewSlots(kv, string(rune('a'+i)), zerolog.Nop())
		if shorten {
			sl.ShortenGraces(time.Second, 100*time.Millisecond)
		}
		wg.Go(func() { sl.Run(ctx) })
		out = append(out, sl)
	}
	return kv, out
}

// TestAcquireNeverExceedsTheLimit: eight workers race for a key of limit 3
// forty times over; at no time do more than three hold a slot, and each
// round fills it.
func TestAcquireNeverExceedsTheLimit(t *testing.T) {
	_, views := slotsOf(t, 8, false)
	ctx := t.Context()
	for round := range 40 {
		var (
			mu  sync.Mutex
			got []*tenancy.Slot
			wg  sync.WaitGroup
		)
		for _, v := range views {
			wg.Go(func() {
				sl, err := v.Acquire(ctx, "acme", 3)
				if errors.Is(err, tenancy.ErrKeyFull) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, sl)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(got) > 3 {
			t.Fatalf("round %d: %d slots of a key of limit 3", round, len(got))
		}
		// The views lag the bucket, so a round may fill fewer; never more.
		for i, sl := range got {
			if err := sl.Bind(ctx, "run-"+string(rune('a'+i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, sl := range got {
			sl.Release(ctx)
		}
	}
}

func TestReapFreesTheSlotsOfEndedRuns(t *testing.T) {
	kv, views := slotsOf(t, 2, false)
	ctx := t.Context()
	a, b := views[0], views[1]
	live, err := a.Acquire(ctx, "acme", 2)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := a.Acquire(ctx, "acme", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Bind(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if err := ended.Bind(ctx, "ended"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the other worker to see both slots bound", func() bool {
		_, l := b.RunSlot("live")
		_, e := b.RunSlot("ended")
		return l && e
	})
	if _, err := b.Acquire(ctx, "acme", 2); !errors.Is(err, tenancy.ErrKeyFull) {
		t.Fatalf("a third slot of a key of limit 2: %v", err)
	}
	states := func(_ context.Context, run string) (tenancy.RunState, error) {
		if run == "ended" {
			return tenancy.RunEnded, nil
		}
		return tenancy.RunLive, nil
	}
	if n := b.Reap(ctx, "acme", states, time.Minute); n != 1 {
		t.Fatalf("reaped %d slots, want the ended run's one", n)
	}
	if _, err := kv.Get(ctx, live.Key); err != nil {
		t.Fatalf("the live run's slot: %v", err)
	}
	if !b.Renew(ctx, "live") || b.Renew(ctx, "ended") {
		t.Fatal("Renew: the live run holds its slot, the ended one none")
	}
	// The slot freed is taken again; the live run's renewed slot is not
	// the first worker's to release with the revision it had.
	if _, err := b.Acquire(ctx, "acme", 2); err != nil {
		t.Fatalf("the freed slot: %v", err)
	}
	live.Release(ctx)
	if _, err := kv.Get(ctx, live.Key); err != nil {
		t.Fatalf("a stale release deleted the renewed slot: %v", err)
	}
	b.ReleaseRun(ctx, "live")
	if _, err := kv.Get(ctx, live.Key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("ReleaseRun left the slot: %v", err)
	}
}

// TestUnboundSlotsAreSwept: a slot claimed by a worker that died before
// its job's take (never bound) is freed by another worker's sweep once
// the grace has passed; a bound one is not.
func TestUnboundSlotsAreSwept(t *testing.T) {
	kv, views := slotsOf(t, 2, true)
	ctx := t.Context()
	dead, err := views[0].Acquire(ctx, "acme", 2)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := views[0].Acquire(ctx, "acme", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := bound.Bind(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the unbound slot swept", func() bool {
		_, err := kv.Get(ctx, dead.Key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	time.Sleep(1500 * time.Millisecond) // past the bound slot's grace too
	if _, err := kv.Get(ctx, bound.Key); err != nil {
		t.Fatalf("the bound slot was swept: %v", err)
	}
}
