package consumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/tenancy"
)

// TestRunningLaneIsNotPolled: while a keyed job runs, its lane still
// counts it (a job is in the stream until its ack), and the worker has
// free slots; the intake must not claim a key slot, pull the lane empty
// and release the slot over and over (it did, as fast as the KV answered:
// the fairness bench row's keyed start cost 3 × the CPU of an unkeyed
// one). A second job published on the lane meanwhile still starts at once.
func TestRunningLaneIsNotPolled(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Tenancy.KeyConcurrency.Default = 4
	slots := tenancy.NewSlots(res.Slots, "w1", zerolog.Nop())
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { slots.Run(runCtx) })
	live := func(context.Context, string) (tenancy.RunState, error) { return tenancy.RunLive, nil }
	in := consumer.New(js, names, cfg, consumer.WithSelf("/bin/true"), consumer.WithFetchWait(5*time.Second),
		consumer.WithSlots(slots, live))
	release := make(chan struct{})
	var started atomic.Int32
	startedAt := make(chan time.Time, 2)
	wg.Go(func() {
		_ = in.Run(runCtx, 4, "n1", consumer.Handlers{
			Run: func(ctx context.Context, j consumer.Job) {
				started.Add(1)
				startedAt <- time.Now()
				<-release
				_ = j.Msg.Ack()
			},
			Attach: func(ctx context.Context, msg jetstream.Msg) { _ = msg.Ack() },
		})
	})
	cl, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Submit(ctx, protocol.Job{RunID: "k1", Profile: "demo"}, client.WithKey("k", 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-startedAt:
	case <-ctx.Done():
		t.Fatal("the keyed job did not start")
	}
	// The slots bucket's writes while the job runs: its bind, and at most
	// a look a second (drainedFor) at a lane that looks full.
	st, err := js.Stream(ctx, "KV_"+names.SlotsBucket())
	if err != nil {
		t.Fatal(err)
	}
	seq := func() uint64 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := seq()
	time.Sleep(3 * time.Second)
	if n := seq() - before; n > 10 {
		t.Fatalf("%d writes to the slots bucket in 3 s while one keyed job ran; want at most 10 (a claim and its release a second)", n)
	}
	// A new job of the key starts at once, the lane's publish waking the
	// intake.
	published := time.Now()
	if err := cl.Submit(ctx, protocol.Job{RunID: "k2", Profile: "demo"}, client.WithKey("k", 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-startedAt:
		if d := at.Sub(published); d > 2*time.Second {
			t.Fatalf("the second keyed job started %v after its publish", d)
		}
	case <-ctx.Done():
		t.Fatal("the second keyed job did not start")
	}
	close(release)
	stop()
	wg.Wait()
}
