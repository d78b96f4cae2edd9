package publisher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// TestAlignReadsTheLeader: the events stream allows direct gets (the read
// relay's), and Align still reads the chain's last message exactly, headers
// included, through the leader's message get: the same position a direct
// get of the stream gives on one server, and none for an empty chain.
func TestAlignReadsTheLeader(t *testing.T) {
	b := r1(t)
	ctx := ctxT(t)
	if info := b.res.Events.CachedInfo(); !info.Config.AllowDirect {
		t.Fatal("the events stream does not allow direct gets")
	}
	ch := publisher.NewChain(b.js, names, "lead-1", 0, publisher.WithEpoch(7))
	if err := ch.PublishLine(ctx, []byte(`{"n":1}`), 8); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishStatus(ctx, protocol.Status{Status: protocol.StatusRunning, RunID: "lead-1", Epoch: 7, Offset: 8}); err != nil {
		t.Fatal(err)
	}
	pos, err := publisher.Align(ctx, b.js, names, "lead-1")
	if err != nil {
		t.Fatal(err)
	}
	direct, err := b.res.Events.GetLastMsgForSubject(ctx, names.RunFilter("lead-1"))
	if err != nil {
		t.Fatal(err)
	}
	if pos.Seq != direct.Sequence || pos.Seq != ch.LastSeq() || pos.Subject != direct.Subject || pos.MsgID != direct.Header.Get(protocol.HeaderMsgID) {
		t.Fatalf("Align %+v; the stream's last message: seq %d %s %v", pos, direct.Sequence, direct.Subject, direct.Header)
	}
	if pos, err := publisher.Align(ctx, b.js, names, "lead-empty"); err != nil || pos != (publisher.Position{}) {
		t.Fatalf("Align of an empty chain: %+v, %v", pos, err)
	}
	var apiErr *jetstream.APIError
	if _, err := publisher.Align(ctx, b.js, protocol.MustNames("nosuch"), "lead-1"); !errors.As(err, &apiErr) {
		t.Fatalf("Align without the stream: %v, want the server's API error", err)
	}
}

// TestAlignUnansweredIsBounded: a read of a chain's tail whose request no
// server answers (a stream between leaders: in a fresh-clone CI's cluster
// chaos run a start sat 3.5 min in Align so, holding the run's lease) ends
// with a timeout after leader.Timeout, even when the caller's context has
// no deadline. The server here has no JetStream, and a subscriber takes the
// API's requests without answering, as a server that forwards a request to
// a leader that is gone does.
func TestAlignUnansweredIsBounded(t *testing.T) {
	s := testenv.RunServerWith(t, func(o *server.Options) { o.JetStream = false })
	nc, js := testenv.Connect(t, s)
	sub, err := nc.SubscribeSync("$JS.API.STREAM.MSG.GET.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := publisher.Align(context.Background(), js, names, "lead-silent")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Align without an answer: %v, want a deadline exceeded", err)
		}
		if took := time.Since(start); took < 4*time.Second || took > 8*time.Second {
			t.Fatalf("Align without an answer gave up after %v, want about 5 s", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Align waited 15 s for an answer no server gives: a read of the tail is unbounded")
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		t.Fatalf("the silent responder never saw Align's request: %v", err)
	}
}
