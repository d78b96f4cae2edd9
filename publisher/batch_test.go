package publisher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// Batch scenarios run in TestR1 and TestR3 with the others (see
// scenarios): a single server and a cluster dedupe and check expectations
// in different places.
func init() {
	scenarios = append(scenarios, []struct {
		name string
		fn   func(*testing.T, *backend)
	}{
		{"batch routing and headers", testBatchRouting},
		{"batch zombie fenced whole", testBatchZombie},
		{"batch lost ack retried", testBatchLostAck},
		{"batches from goroutines", testBatchConcurrent},
		{"batch refuses bad lines", testBatchBadLines},
	}...)
}

// lines makes n journal lines ending after offset from, each made by mk.
func lines(from int64, n int, mk func(i int) string) []follow.Line {
	out := make([]follow.Line, n)
	end := from
	for i := range out {
		data := []byte(mk(i))
		end += int64(len(data)) + 1
		out[i] = follow.Line{Data: data, Start: end - int64(len(data)) - 1, End: end}
	}
	return out
}

func jsonLine(i int) string { return fmt.Sprintf(`{"type":"delta","i":%d}`, i) }

// ids lists the Msg-Ids lines get on runID's chain.
func ids(runID string, ls ...[]follow.Line) []string {
	var out []string
	for _, l := range ls {
		for _, ln := range l {
			out = append(out, lineID(runID, ln.End))
		}
	}
	return out
}

// batches groups a chain's messages by Nats-Batch-Id, checking that every
// batch is contiguous on the chain and numbered 1..n.
func batches(t *testing.T, ms []stored) (sizes []int, unbatched int) {
	t.Helper()
	cur := ""
	for i, m := range ms {
		id := m.get("Nats-Batch-Id")
		if id == "" {
			unbatched++
			cur = ""
			continue
		}
		seq := m.get("Nats-Batch-Sequence")
		if id != cur {
			if seq != "1" {
				t.Fatalf("message %d starts batch %s at sequence %s", i, id, seq)
			}
			cur = id
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1]++
		if want := strconv.Itoa(sizes[len(sizes)-1]); seq != want {
			t.Fatalf("message %d of batch %s has sequence %s, want %s", i, id, seq, want)
		}
	}
	return sizes, unbatched
}

// testBatchRouting: PublishLines stores exactly what PublishLine would,
// line by line, cut into batches by the limits, with a chunked line going
// alone in the middle.
func testBatchRouting(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "broute"
	kinds := []struct {
		line string
		json bool
	}{
		{`{"a":1}`, true}, {"plain text", false}, {"", false}, {"  \t", false},
		{`[1,2]`, true}, {`{"broken":`, false}, {"{\"crlf\":1}\r", true}, {"\xff not utf-8", false},
	}
	long := `{"long":"` + strings.Repeat("x", 150) + `"}` // 3 chunks of 64 bytes at most
	isJSON := map[int64]bool{}
	in := lines(0, 19, func(i int) string {
		if i == 9 {
			return long
		}
		return kinds[i%len(kinds)].line
	})
	for i, l := range in {
		isJSON[l.End] = i == 9 || kinds[i%len(kinds)].json
	}
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(4), publisher.WithMaxPayload(64),
		publisher.WithBatchLimits(4, 1<<20), publisher.WithMinBatch(2))
	if err := c.PublishLines(ctx, in); err != nil {
		t.Fatal(err)
	}
	ms := chain(t, b, run)
	var joined []byte
	i := 0
	for _, l := range in {
		n := 1
		if len(l.Data) > 64 {
			n = 3
		}
		wantSubj := names.RawSubject(run)
		if isJSON[l.End] {
			wantSubj = names.EventsSubject(run)
		}
		joined = joined[:0]
		for k := 1; k <= n; k++ {
			if i >= len(ms) {
				t.Fatalf("chain has %d messages, ran out at line ending %d", len(ms), l.End)
			}
			m := ms[i]
			wantID := lineID(run, l.End)
			if n > 1 {
				wantID += fmt.Sprintf(":%d/%d", k, n)
				if m.get(protocol.HeaderChunk) != fmt.Sprintf("%d/%d", k, n) || m.get("Nats-Batch-Id") != "" {
					t.Fatalf("chunk %d: headers %v", k, m.header)
				}
			}
			if m.subject != wantSubj || m.get(protocol.HeaderMsgID) != wantID ||
				m.get(protocol.HeaderOffset) != fmt.Sprint(l.End) || m.get(protocol.HeaderEpoch) != "4" {
				t.Fatalf("message %d: %s %v; want %s %s", i, m.subject, m.header, wantSubj, wantID)
			}
			joined = append(joined, m.data...)
			i++
		}
		if !bytes.Equal(joined, l.Data) {
			t.Fatalf("line ending %d stored as %q, want %q", l.End, joined, l.Data)
		}
	}
	if i != len(ms) {
		t.Fatalf("chain has %d messages, want %d", len(ms), i)
	}
	// 9 lines, the chunked line (3 messages, not batched), 9 lines: 4+4+1
	// each side, and the lone line goes as a single message.
	sizes, unbatched := batches(t, ms)
	if !slices.Equal(sizes, []int{4, 4, 4, 4}) || unbatched != 5 {
		t.Fatalf("batch sizes %v and %d messages outside batches; want [4 4 4 4] and 5", sizes, unbatched)
	}
	if c.LastSeq() != ms[len(ms)-1].seq {
		t.Fatalf("LastSeq %d, last stored %d", c.LastSeq(), ms[len(ms)-1].seq)
	}
	// The byte bound cuts batches too: lines of 20 bytes, 50 bytes a batch.
	const run2 = "bbytes"
	c2 := publisher.NewChain(b.js, names, run2, 0, publisher.WithBatchLimits(1000, 50), publisher.WithMinBatch(2))
	in2 := lines(0, 12, func(i int) string { return fmt.Sprintf(`{"n":"%012d"}`, i) }) // 20 bytes
	if err := c2.PublishLines(ctx, in2); err != nil {
		t.Fatal(err)
	}
	ms2 := chain(t, b, run2)
	if got := msgIDs(ms2); !slices.Equal(got, ids(run2, in2)) {
		t.Fatalf("chain %v, want %v", got, ids(run2, in2))
	}
	if sizes, unbatched := batches(t, ms2); !slices.Equal(sizes, []int{2, 2, 2, 2, 2, 2}) || unbatched != 0 {
		t.Fatalf("batch sizes %v, %d outside; want six batches of 2", sizes, unbatched)
	}
	// Fewer lines than the minimum go one message each.
	c3 := publisher.NewChain(b.js, names, "bfew", 0)
	if err := c3.PublishLines(ctx, lines(0, publisher.DefaultMinBatch-1, jsonLine)); err != nil {
		t.Fatal(err)
	}
	if sizes, unbatched := batches(t, chain(t, b, "bfew")); len(sizes) != 0 || unbatched != publisher.DefaultMinBatch-1 {
		t.Fatalf("%d lines went out in batches %v", publisher.DefaultMinBatch-1, sizes)
	}
}

// testBatchZombie is I1 for batches: a publisher that lost the chain has
// its whole batch refused, whether its lines are new or the very lines its
// successor published (same Msg-Ids).
func testBatchZombie(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "bzombie"
	sub := live(t, b, run)
	opts := []publisher.Option{publisher.WithMinBatch(2)}
	a := publisher.NewChain(b.js, names, run, 0, append(opts, publisher.WithEpoch(1))...)
	first := lines(0, 40, jsonLine)
	if err := a.PublishLines(ctx, first); err != nil {
		t.Fatal(err)
	}
	aLast := a.LastSeq()
	pos, err := publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Seq != aLast || pos.Offset != first[39].End {
		t.Fatalf("Align = %+v, %v", pos, err)
	}
	succ := publisher.NewChain(b.js, names, run, pos.Seq, append(opts, publisher.WithEpoch(2))...)
	if err := succ.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: pos.Offset}); err != nil {
		t.Fatal(err)
	}
	next := lines(pos.Offset, 50, func(i int) string { return jsonLine(100 + i) })
	err = a.PublishLines(ctx, next)
	if !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("zombie batch: %v, want ErrFenced", err)
	}
	if got := len(chain(t, b, run)); got != 41 {
		t.Fatalf("after the zombie's batch the chain has %d messages, want 41: the batch was not refused whole", got)
	}
	if err := a.PublishLines(ctx, next); !errors.Is(err, publisher.ErrFenced) || a.LastSeq() != aLast {
		t.Fatalf("fenced chain again: %v, LastSeq %d (was %d)", err, a.LastSeq(), aLast)
	}
	if err := succ.PublishLines(ctx, next); err != nil {
		t.Fatalf("successor: %v", err)
	}
	// A zombie of epoch 1 sends the successor's lines: the server finds
	// their Msg-Ids stored (by epoch 2), and the chain must not adopt them.
	zombie2 := publisher.NewChain(b.js, names, run, aLast, append(opts, publisher.WithEpoch(1))...)
	if err := zombie2.PublishLines(ctx, next); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("zombie batch of the successor's lines: %v, want ErrFenced", err)
	}
	more := lines(next[49].End, 5, jsonLine)
	zombie3 := publisher.NewChain(b.js, names, run, aLast, append(opts, publisher.WithEpoch(1))...)
	if err := zombie3.PublishLines(ctx, append(slices.Clone(next), more...)); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("zombie batch of the successor's lines and new ones: %v, want ErrFenced", err)
	}
	want := append(ids(run, first), run+":status:attached:2:"+fmt.Sprint(pos.Offset))
	want = append(want, ids(run, next)...)
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v,\nwant %v", got, want)
	}
	for _, m := range ms[40:] {
		if m.get(protocol.HeaderEpoch) != "2" {
			t.Fatalf("message %d after the takeover has epoch %q", m.seq, m.get(protocol.HeaderEpoch))
		}
	}
	sub.equals(t, ms)
}

// testBatchLostAck: a batch stored whose ack was lost is sent again by a
// chain still at the previous sequence, alone or with more lines; nothing
// is stored twice (R1 and R3 both refuse the retry as a duplicate, and the
// chain reads its tip). Older lines sent again are settled one by one.
func testBatchLostAck(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "blostack"
	sub := live(t, b, run)
	opts := []publisher.Option{publisher.WithMinBatch(2), publisher.WithEpoch(3)}
	a := publisher.NewChain(b.js, names, run, 0, opts...)
	l1 := lines(0, 10, jsonLine)
	l2 := lines(l1[9].End, 10, func(i int) string { return jsonLine(10 + i) })
	l3 := lines(l2[9].End, 10, func(i int) string { return jsonLine(20 + i) })
	l4 := lines(l3[9].End, 10, func(i int) string { return jsonLine(30 + i) })
	if err := a.PublishLines(ctx, l1); err != nil {
		t.Fatal(err)
	}
	before := a.LastSeq()
	if err := a.PublishLines(ctx, l2); err != nil {
		t.Fatal(err)
	}
	stored := a.LastSeq()

	retry := publisher.NewChain(b.js, names, run, before, opts...)
	if err := retry.PublishLines(ctx, l2); err != nil {
		t.Fatalf("retry of a stored batch: %v", err)
	}
	if retry.LastSeq() != stored {
		t.Fatalf("after the retry LastSeq %d, want %d", retry.LastSeq(), stored)
	}
	// The caller retries with more lines than the lost batch had.
	retry2 := publisher.NewChain(b.js, names, run, before, opts...)
	if err := retry2.PublishLines(ctx, slices.Concat(l2, l3)); err != nil {
		t.Fatalf("retry of a stored batch with new lines: %v", err)
	}
	// Older lines again: on the chain already, which stays where it is;
	// mixed with new lines, only the new ones are stored.
	at := retry2.LastSeq()
	if err := retry2.PublishLines(ctx, l1); err != nil || retry2.LastSeq() != at {
		t.Fatalf("older lines again: %v, LastSeq %d -> %d", err, at, retry2.LastSeq())
	}
	if err := retry2.PublishLines(ctx, slices.Concat(l3, l4)); err != nil {
		t.Fatalf("older and new lines: %v", err)
	}
	ms := chain(t, b, run)
	if got, want := msgIDs(ms), ids(run, l1, l2, l3, l4); !slices.Equal(got, want) {
		t.Fatalf("chain %v,\nwant %v", got, want)
	}
	if retry2.LastSeq() != ms[len(ms)-1].seq {
		t.Fatalf("LastSeq %d, last stored %d", retry2.LastSeq(), ms[len(ms)-1].seq)
	}
	sub.equals(t, ms)
}

// testBatchConcurrent: goroutines sharing a chain, batches and statuses
// mixed, never pipeline fenced publishes.
func testBatchConcurrent(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "bconc"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithMinBatch(2))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			errs <- c.PublishLines(ctx, lines(int64(g)*100000, 20, jsonLine))
			errs <- c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: int64(g)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ms := chain(t, b, run)
	got := msgIDs(ms)
	slices.Sort(got)
	if len(ms) != 84 || len(slices.Compact(got)) != 84 {
		t.Fatalf("%d messages, %d distinct, want 84", len(ms), len(got))
	}
	if c.LastSeq() != ms[83].seq {
		t.Fatalf("LastSeq %d, last stored %d", c.LastSeq(), ms[83].seq)
	}
}

func testBatchBadLines(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "bbad"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithMinBatch(2))
	for name, in := range map[string][]follow.Line{
		"nil data":       {{Data: []byte("a"), End: 2}, {Data: nil, Start: 2, End: 9000000}},
		"ends go back":   {{Data: []byte("a"), End: 4}, {Data: []byte("b"), End: 2}},
		"ends duplicate": {{Data: []byte("a"), End: 2}, {Data: []byte("a"), End: 2}},
	} {
		if err := c.PublishLines(ctx, in); err == nil || errors.Is(err, publisher.ErrFenced) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	if n := len(chain(t, b, run)); n != 0 {
		t.Fatalf("bad input stored %d messages", n)
	}
	if err := c.PublishLines(ctx, nil); err != nil {
		t.Fatalf("no lines: %v", err)
	}
	if err := c.PublishLines(ctx, lines(0, 3, jsonLine)); err != nil {
		t.Fatalf("good lines after bad ones: %v", err)
	}
}

// TestBatchServerLimits: a server allowing fewer messages per batch than
// the chain asks for, and a stream that does not allow atomic publish:
// the chain adapts and every line is stored once, in order.
func TestBatchServerLimits(t *testing.T) {
	t.Parallel()
	t.Run("batch size", func(t *testing.T) {
		t.Parallel()
		s := testenv.RunServerWith(t, func(o *server.Options) { o.JetStreamLimits.MaxBatchSize = 10 })
		nc, js := testenv.Connect(t, s)
		b := provisioned(t, nc, js, 1)
		ctx := ctxT(t)
		c := publisher.NewChain(js, names, "limit", 0, publisher.WithMinBatch(2))
		in := lines(0, 95, jsonLine)
		if err := c.PublishLines(ctx, in); err != nil {
			t.Fatal(err)
		}
		if err := c.PublishLines(ctx, lines(in[94].End, 30, jsonLine)); err != nil {
			t.Fatal(err)
		}
		ms := chain(t, b, "limit")
		if len(ms) != 125 || !slices.Equal(msgIDs(ms)[:95], ids("limit", in)) {
			t.Fatalf("%d messages: %v", len(ms), msgIDs(ms))
		}
		sizes, _ := batches(t, ms)
		if len(sizes) == 0 || slices.Max(sizes) > 10 {
			t.Fatalf("batch sizes %v; want batches of at most 10", sizes)
		}
	})
	t.Run("too many batches in flight", func(t *testing.T) {
		t.Parallel()
		s := testenv.RunServerWith(t, func(o *server.Options) { o.JetStreamLimits.MaxBatchInflightPerStream = 1 })
		nc, js := testenv.Connect(t, s)
		b := provisioned(t, nc, js, 1)
		ctx := ctxT(t)
		// Someone opens a batch on the stream and never commits it: the
		// server takes no other batch (the first message of ours is
		// refused without a word, so its commit finds the batch incomplete).
		open := nats.NewMsg(names.IngestSubject("other", protocol.KindEvents))
		open.Header.Set("Nats-Batch-Id", "never-committed")
		open.Header.Set("Nats-Batch-Sequence", "1")
		if err := nc.PublishMsg(open); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		c := publisher.NewChain(js, names, "inflight", 0, publisher.WithMinBatch(2))
		in := lines(0, 20, jsonLine)
		if err := c.PublishLines(ctx, in); err != nil {
			t.Fatal(err)
		}
		ms := chain(t, b, "inflight")
		if got := msgIDs(ms); !slices.Equal(got, ids("inflight", in)) {
			t.Fatalf("chain %v", got)
		}
		if sizes, _ := batches(t, ms); len(sizes) != 0 {
			t.Fatalf("batches %v stored while the stream took no batch", sizes)
		}
	})
	t.Run("ingest queue full", func(t *testing.T) {
		t.Parallel()
		// The stream takes 20 messages at a time; every batch of 60 is
		// cut short, and the commit, if it gets there, is refused (429).
		s := testenv.RunServerWith(t, func(o *server.Options) { o.StreamMaxBufferedMsgs = 20 })
		nc, js := testenv.Connect(t, s)
		b := provisioned(t, nc, js, 1)
		ctx := ctxT(t)
		var in []follow.Line
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for r := range 3 {
			// Three runs at once, so the queue is full whatever the timing.
			run := fmt.Sprintf("queue%d", r)
			c := publisher.NewChain(js, names, run, 0, publisher.WithMinBatch(2), publisher.WithRetryWait(5*time.Millisecond))
			l := lines(0, 60, jsonLine)
			in = l
			wg.Go(func() { errs <- c.PublishLines(ctx, l) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("publish into a full queue: %v", err)
			}
		}
		for r := range 3 {
			run := fmt.Sprintf("queue%d", r)
			if got := msgIDs(chain(t, b, run)); !slices.Equal(got, ids(run, in)) {
				t.Fatalf("%s: chain %v", run, got)
			}
		}
	})
	t.Run("atomic publish disabled", func(t *testing.T) {
		t.Parallel()
		s := testenv.RunServer(t)
		nc, js := testenv.Connect(t, s)
		b := provisioned(t, nc, js, 1)
		ctx := ctxT(t)
		cfg := b.res.Events.CachedInfo().Config
		cfg.AllowAtomicPublish = false
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		c := publisher.NewChain(js, names, "noatomic", 0, publisher.WithMinBatch(2))
		in := lines(0, 40, jsonLine)
		if err := c.PublishLines(ctx, in[:20]); err != nil {
			t.Fatal(err)
		}
		if err := c.PublishLines(ctx, in[20:]); err != nil {
			t.Fatal(err)
		}
		ms := chain(t, b, "noatomic")
		if got := msgIDs(ms); !slices.Equal(got, ids("noatomic", in)) {
			t.Fatalf("chain %v", got)
		}
		if sizes, _ := batches(t, ms); len(sizes) != 0 {
			t.Fatalf("batches %v stored on a stream without atomic publish", sizes)
		}
	})
}

// TestBatchServerRestart: a batch sent while the server is away lands
// once it is back; a batch whose outcome the chain never learned is
// recognised when the chain goes on, by a batch or a status.
func TestBatchServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := testenv.RunServerIn(t, dir, -1)
	port := s.Addr().(*net.TCPAddr).Port
	nc, js := testenv.Connect(t, s)
	b := provisioned(t, nc, js, 1)
	ctx := ctxT(t)
	const run = "brestart"
	c := publisher.NewChain(js, names, run, 0, publisher.WithAttemptTimeout(300*time.Millisecond), publisher.WithMinBatch(2))
	l1 := lines(0, 5, jsonLine)
	l2 := lines(l1[4].End, 5, jsonLine)
	l3 := lines(l2[4].End, 5, jsonLine)
	l4 := lines(l3[4].End, 5, jsonLine)
	if err := c.PublishLines(ctx, l1); err != nil {
		t.Fatal(err)
	}

	// 1. The server goes away during a batch and comes back.
	s.Shutdown()
	s.WaitForShutdown()
	done := make(chan error, 1)
	go func() { done <- c.PublishLines(ctx, l2) }()
	time.Sleep(400 * time.Millisecond)
	s = testenv.RunServerIn(t, dir, port)
	if err := <-done; err != nil {
		t.Fatalf("batch across a restart: %v", err)
	}

	// 2. Away again; the caller gives up. The batch waits in the client's
	// reconnect buffer and lands once the server is back.
	s.Shutdown()
	s.WaitForShutdown()
	testenv.WaitFor(t, 10*time.Second, "the client to see the server gone", func() bool { return nc.Status() == nats.RECONNECTING })
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.PublishLines(short, l3)
	cancel()
	if err == nil || errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("batch while the server is down: %v", err)
	}
	testenv.RunServerIn(t, dir, port)
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("the buffered batch to land (%v)", msgIDs(chain(t, b, run))), func() bool { return len(chain(t, b, run)) == 15 })
	// The caller goes on with the next lines only: the chain finds its
	// earlier batch at the tip and builds on it.
	if err := c.PublishLines(ctx, l4); err != nil {
		t.Fatalf("batch after a batch of unknown outcome: %v", err)
	}
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusHandoff, Offset: l4[4].End}); err != nil {
		t.Fatal(err)
	}
	want := append(ids(run, l1, l2, l3, l4), run+":status:handoff:0:"+fmt.Sprint(l4[4].End))
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v,\nwant %v", got, want)
	}
	if c.LastSeq() != ms[len(ms)-1].seq {
		t.Fatalf("LastSeq %d, want %d", c.LastSeq(), ms[len(ms)-1].seq)
	}
}
