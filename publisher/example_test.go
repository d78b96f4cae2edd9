package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// A run handed off between two workers: A publishes, releases its lease
// with where it stopped, B takes the lease, aligns on the chain, writes
// "attached" (which fences A) and carries on.
func Example_handoff() {
	dir, _ := os.MkdirTemp("", "baton-example-")
	defer os.RemoveAll(dir)
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, dir
	srv := natsserver.RunServer(&opts)
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{LeaseTTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	leases := kv.NewStore[kv.LeaseRecord](res.Leases)

	// Worker A starts the run. Its liveness key keeps all its leases.
	lva, _ := lease.Live(ctx, js, leases, lease.Holder{Worker: "a", Node: "n1"}, 5*time.Second)
	defer lva.Close(ctx)
	la, _ := lva.Acquire(ctx, "run-1")
	a := publisher.NewChain(js, names, "run-1", 0, publisher.WithEpoch(la.Epoch()))
	_ = a.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted})
	_ = a.PublishLine(ctx, []byte(`{"type":"hello"}`), 17)
	_ = a.PublishStatus(ctx, protocol.Status{Status: protocol.StatusHandoff, Offset: 17})
	_ = la.Release(ctx, 17, a.LastSeq())

	// Worker B takes over where A stopped.
	lvb, _ := lease.Live(ctx, js, leases, lease.Holder{Worker: "b", Node: "n1"}, 5*time.Second)
	defer lvb.Close(ctx)
	lb, _ := lvb.Acquire(ctx, "run-1")
	pos, _ := publisher.Align(ctx, js, names, "run-1")
	fmt.Println("resume at offset", pos.Offset, "after a", pos.Status.Status, "status; lease says", lb.Record().Offset)
	b := publisher.NewChain(js, names, "run-1", pos.Seq, publisher.WithEpoch(lb.Epoch()))
	_ = b.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: pos.Offset})
	_ = b.PublishLine(ctx, []byte("plain output"), 30)

	// A, had it kept going, is refused.
	err = a.PublishLine(ctx, []byte(`{"type":"late"}`), 30)
	fmt.Println("old holder fenced:", errors.Is(err, publisher.ErrFenced))
	// Output:
	// resume at offset 17 after a handoff status; lease says 17
	// old holder fenced: true
}

// A run's backlog (here 100 lines the follower handed over at once) goes
// out as one fenced atomic batch instead of 100 round trips.
func ExampleChain_PublishLines() {
	dir, _ := os.MkdirTemp("", "baton-example-")
	defer os.RemoveAll(dir)
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, dir
	srv := natsserver.RunServer(&opts)
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{LeaseTTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}

	var lines []follow.Line
	var end int64
	for i := range 100 {
		data := []byte(fmt.Sprintf(`{"type":"delta","i":%d}`, i))
		end += int64(len(data)) + 1
		lines = append(lines, follow.Line{Data: data, End: end})
	}
	c := publisher.NewChain(js, names, "run-2", 0, publisher.WithEpoch(1))
	if err := c.PublishLines(ctx, lines); err != nil {
		fmt.Println(err)
		return
	}
	info, _ := res.Events.Info(ctx, jetstream.WithSubjectFilter(names.RunFilter("run-2")))
	fmt.Println("messages:", info.State.Msgs, "last sequence:", c.LastSeq())
	// Output:
	// messages: 100 last sequence: 100
}
