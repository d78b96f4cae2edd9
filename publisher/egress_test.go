package publisher_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// An egress record goes on the run's egress subject as its Egress JSON,
// with the line's Msg-Id and offset, and a successor aligns from it as
// from a line.
func TestPublishEgress(t *testing.T) {
	b := r1(t)
	ctx := ctxT(t)
	const run = "egress"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(3))
	if err := c.PublishLine(ctx, []byte(`{"a":1}`), 8); err != nil {
		t.Fatal(err)
	}
	rec := journal.EgressRecord{Egress: journal.Egress{Start: time.Unix(1, 0).UTC(), Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, BytesOut: 5, BytesIn: 7, DurationMs: 2}, Nonce: "n"}
	if err := c.PublishEgress(ctx, rec, 200); err != nil {
		t.Fatal(err)
	}
	pos, err := publisher.Align(ctx, b.js, names, run)
	want := publisher.Position{Seq: c.LastSeq(), Offset: 200, MsgID: lineID(run, 200), Subject: names.EgressSubject(run), Kind: protocol.KindEgress, Epoch: 3}
	if err != nil || pos != want {
		t.Fatalf("Align after an egress message = %+v, %v; want %+v", pos, err, want)
	}
	stream, err := b.js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	got, err := stream.GetLastMsgForSubject(ctx, names.EgressSubject(run))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != string(rec.Body()) || got.Header.Get(protocol.HeaderOffset) != "200" {
		t.Fatalf("egress message %s %v, want body %s at offset 200", got.Data, got.Header, rec.Body())
	}
}
