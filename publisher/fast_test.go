package publisher_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// Fast batch scenarios run in TestR1 and TestR3: a single server takes
// them, a cluster refuses them and the chain falls back to atomic batches;
// the chain must be the same.
func init() {
	scenarios = append(scenarios, []struct {
		name string
		fn   func(*testing.T, *backend)
	}{
		{"fast batches", testFastBatches},
		{"fast batch fenced mid-batch", testFastFenced},
		{"fast batch with a lost message", testFastGap},
		{"fast batch of unknown outcome", testFastUnknown},
	}...)
}

func fastOpts(epoch uint64, more ...publisher.Option) []publisher.Option {
	return append([]publisher.Option{publisher.WithMinBatch(2), publisher.WithEpoch(epoch), publisher.WithFastBatches(true),
		publisher.WithAttemptTimeout(time.Second)}, more...)
}

// testFastBatches: a chain with its own status publishes its lines as fast
// batches on R1 (the second message of a batch is fenced on the status
// subject), in order and once each.
func testFastBatches(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "fast"
	sub := live(t, b, run)
	c := publisher.NewChain(b.js, names, run, 0, fastOpts(1)...)
	first := lines(0, 30, jsonLine)
	// No status of its own yet: atomic batches.
	if err := c.PublishLines(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted, Offset: first[29].End}); err != nil {
		t.Fatal(err)
	}
	next := lines(first[29].End, 50, jsonLine)
	if err := c.PublishLines(ctx, next[:20]); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishLines(ctx, next); err != nil { // 20 again, then 30 more
		t.Fatal(err)
	}
	ms := chain(t, b, run)
	want := append(ids(run, first), run+":status:started:1:"+strconv.FormatInt(first[29].End, 10))
	want = append(want, ids(run, next)...)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain:\n%v\nwant\n%v", got, want)
	}
	if ms[len(ms)-1].seq != c.LastSeq() {
		t.Fatalf("LastSeq %d, chain ends at %d", c.LastSeq(), ms[len(ms)-1].seq)
	}
	fenceSubj := ms[32].get("Nats-Expected-Last-Subject-Sequence-Subject")
	if len(b.servers) == 1 && fenceSubj != names.StatusSubject(run) {
		t.Fatalf("second line after the status fenced on %q: not a fast batch", fenceSubj)
	}
	sub.equals(t, ms)
}

// testFastFenced: a successor takes the chain between the first and the
// second message of a stale holder's fast batch; nothing of the stale
// holder's batch is stored after the successor's status (I1).
func testFastFenced(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "fastfenced"
	var took error
	var succ *publisher.Chain
	var pos publisher.Position
	var a *publisher.Chain
	first := lines(0, 10, jsonLine)
	takeOver := func(i int) bool {
		if i != 1 || succ != nil {
			return true
		}
		// Wait for the stale holder's first message, then take over.
		deadline := time.Now().Add(10 * time.Second)
		for {
			pos, took = publisher.Align(ctx, b.js, names, run)
			if took != nil || pos.Seq > a.LastSeq() || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if took == nil && pos.Seq <= a.LastSeq() {
			took = errors.New("the stale holder's first message never reached the chain")
		}
		if took == nil {
			succ = publisher.NewChain(b.js, names, run, pos.Seq, fastOpts(2)...)
			took = succ.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: pos.Offset})
		}
		return true
	}
	a = publisher.NewChain(b.js, names, run, 0, fastOpts(1, publisher.WithBeforeFastMessage(takeOver))...)
	if err := a.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted}); err != nil {
		t.Fatal(err)
	}
	err := a.PublishLines(ctx, first)
	if took != nil {
		t.Fatalf("take-over: %v", took)
	}
	if succ == nil {
		t.Fatal("no fast batch was sent")
	}
	ms := msgIDs(chain(t, b, run))
	if len(b.servers) > 1 {
		// A cluster refuses the fast batch at its second message; the
		// stale holder settles its lines by an atomic batch, which the
		// successor's status fences.
		if !errors.Is(err, publisher.ErrFenced) {
			t.Fatalf("stale holder: %v, want ErrFenced", err)
		}
		return
	}
	if !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("stale holder's fast batch: %v, want ErrFenced", err)
	}
	want := []string{run + ":status:started:1:0", lineID(run, first[0].End), run + ":status:attached:2:" + strconv.FormatInt(pos.Offset, 10)}
	if !slices.Equal(ms, want) {
		t.Fatalf("chain:\n%v\nwant\n%v", ms, want)
	}
}

// testFastGap: a message of a fast batch is lost on its way; the server
// stores none after it, and the chain settles the rest in order (I2).
func testFastGap(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "fastgap"
	dropped := false
	drop := func(i int) bool {
		if i == 5 && !dropped {
			dropped = true
			return false
		}
		return true
	}
	c := publisher.NewChain(b.js, names, run, 0, fastOpts(1, publisher.WithBeforeFastMessage(drop))...)
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted}); err != nil {
		t.Fatal(err)
	}
	ls := lines(0, 40, jsonLine)
	if err := c.PublishLines(ctx, ls); err != nil {
		t.Fatal(err)
	}
	if !dropped {
		t.Fatal("no fast batch was sent")
	}
	want := append([]string{run + ":status:started:1:0"}, ids(run, ls)...)
	if got := msgIDs(chain(t, b, run)); !slices.Equal(got, want) {
		t.Fatalf("chain:\n%v\nwant\n%v", got, want)
	}
}

// testFastUnknown: the publish of a fast batch ends (its context) before
// the batch's ack, and the batch lands; the chain's next publish finds one
// of its lines at the tip and goes on from it, not taking it for another
// publisher's.
func testFastUnknown(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "fastunknown"
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ls := lines(0, 40, jsonLine)
	cancelAtLast := func(i int) bool {
		if i == len(ls)-1 {
			cancel()
		}
		return true
	}
	c := publisher.NewChain(b.js, names, run, 0, fastOpts(1, publisher.WithBeforeFastMessage(cancelAtLast))...)
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted}); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishLines(bctx, ls); !errors.Is(err, context.Canceled) {
		t.Fatalf("PublishLines with its context ended: %v, want context.Canceled", err)
	}
	// The batch was sent whole: a single server stores all its lines, in
	// order; a cluster the first few, then refuses the rest (10164).
	all := append([]string{run + ":status:started:1:0"}, ids(run, ls)...)
	want := all
	deadline := time.Now().Add(10 * time.Second)
	for got := msgIDs(chain(t, b, run)); !slices.Equal(got, want); got = msgIDs(chain(t, b, run)) {
		if len(b.servers) > 1 && len(got) > 1 && slices.Equal(got, all[:len(got)]) {
			time.Sleep(200 * time.Millisecond) // what the cluster will store of it
			want = msgIDs(chain(t, b, run))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chain:\n%v\nwant\n%v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusHandoff, Offset: ls[39].End}); err != nil {
		t.Fatalf("status after the fast batch of unknown outcome: %v", err)
	}
	want = append(want, run+":status:handoff:1:"+strconv.FormatInt(ls[39].End, 10))
	if got := msgIDs(chain(t, b, run)); !slices.Equal(got, want) {
		t.Fatalf("chain:\n%v\nwant\n%v", got, want)
	}
}
