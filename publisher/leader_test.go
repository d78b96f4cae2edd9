package publisher_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

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
