package publisher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// scenarios run on a single server and on a 3-node cluster: the server
// resolves retries and fencing differently on each (nats.md 3.2).
var scenarios = []struct {
	name string
	fn   func(*testing.T, *backend)
}{
	{"routing and headers", testRouting},
	{"one publish in flight", testSerialized},
	{"zombie fenced", testZombieFenced},
	{"lost ack retried", testLostAck},
	{"lease takeover fences old holder", testLeaseTakeover},
	{"3 MiB line chunked", testChunked},
	{"resume a chunked line", testResumeChunks},
	{"interrupted chunked line retried", testInterruptedChunks},
	{"align", testAlign},
	{"statuses", testStatuses},
}

func TestR1(t *testing.T) {
	t.Parallel()
	b := r1(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { t.Parallel(); sc.fn(t, b) })
	}
}

func TestR3(t *testing.T) {
	t.Parallel()
	b := r3(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { t.Parallel(); sc.fn(t, b) })
	}
}

func testRouting(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "route"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(7))
	other := publisher.NewChain(b.js, names, "route-other", 0)
	lines := []struct {
		line string
		kind protocol.RunKind
	}{
		{`{"type":"assistant","text":"hi"}`, protocol.KindEvents},
		{"plain text from the agent", protocol.KindRaw},
		{"", protocol.KindRaw},
		{"  \t", protocol.KindRaw},
		{`[1,2]`, protocol.KindEvents},
		{`"just a string"`, protocol.KindEvents},
		{`{"broken":`, protocol.KindRaw},
		{"{\"crlf\":1}\r", protocol.KindEvents},
		{"\xff\xfe not utf-8", protocol.KindRaw},
	}
	var ends []int64
	var end int64
	for i, l := range lines {
		end += int64(len(l.line)) + 1
		ends = append(ends, end)
		if err := c.PublishLine(ctx, []byte(l.line), end); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		// Another run's chain interleaves in the same stream, unaffected.
		if err := other.PublishLine(ctx, []byte("x"), int64(2*(i+1))); err != nil {
			t.Fatalf("other run, line %d: %v", i, err)
		}
	}
	ms := chain(t, b, run)
	if len(ms) != len(lines) {
		t.Fatalf("%d messages stored, want %d", len(ms), len(lines))
	}
	for i, m := range ms {
		l := lines[i]
		wantSubj := names.RawSubject(run)
		if l.kind == protocol.KindEvents {
			wantSubj = names.EventsSubject(run)
		}
		if m.subject != wantSubj || !bytes.Equal(m.data, []byte(l.line)) {
			t.Errorf("line %d: %s %q, want %s %q", i, m.subject, m.data, wantSubj, l.line)
		}
		if got, want := m.get(protocol.HeaderMsgID), lineID(run, ends[i]); got != want {
			t.Errorf("line %d: Msg-Id %q, want %q", i, got, want)
		}
		if got := m.get(protocol.HeaderOffset); got != fmt.Sprint(ends[i]) {
			t.Errorf("line %d: offset %q, want %d", i, got, ends[i])
		}
		if m.get(protocol.HeaderEpoch) != "7" || m.get(protocol.HeaderChunk) != "" {
			t.Errorf("line %d: epoch %q chunk %q", i, m.get(protocol.HeaderEpoch), m.get(protocol.HeaderChunk))
		}
		if i > 0 && m.seq <= ms[i-1].seq {
			t.Errorf("line %d out of order: seq %d after %d", i, m.seq, ms[i-1].seq)
		}
	}
	if c.LastSeq() != ms[len(ms)-1].seq {
		t.Fatalf("LastSeq %d, last stored %d", c.LastSeq(), ms[len(ms)-1].seq)
	}
	if n := len(chain(t, b, "route-other")); n != len(lines) {
		t.Fatalf("other run has %d messages", n)
	}
}

// testSerialized: goroutines sharing a chain never pipeline fenced
// publishes (which R3 refuses with 10164 and R1 with 10071).
func testSerialized(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "serial"
	c := publisher.NewChain(b.js, names, run, 0)
	const goroutines, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				errs <- c.PublishLine(ctx, []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)), int64(g*1000+i+1))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	ms := chain(t, b, run)
	ids := msgIDs(ms)
	slices.Sort(ids)
	if len(ms) != goroutines*each || len(slices.Compact(ids)) != goroutines*each {
		t.Fatalf("%d messages, %d distinct, want %d", len(ms), len(ids), goroutines*each)
	}
	if c.LastSeq() != ms[len(ms)-1].seq {
		t.Fatalf("LastSeq %d, last stored %d", c.LastSeq(), ms[len(ms)-1].seq)
	}
}

// testZombieFenced is I1 at the chain level: once a successor has written
// on top of the chain, the old publisher cannot add one message.
func testZombieFenced(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "zombie"
	sub := live(t, b, run)
	a := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(1))
	for _, end := range []int64{10, 20, 30} {
		if err := a.PublishLine(ctx, []byte(fmt.Sprintf(`{"n":%d}`, end)), end); err != nil {
			t.Fatal(err)
		}
	}
	aLast := a.LastSeq()
	pos, err := publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Seq != aLast || pos.Offset != 30 {
		t.Fatalf("Align = %+v, %v; want seq %d offset 30", pos, err, aLast)
	}
	succ := publisher.NewChain(b.js, names, run, pos.Seq, publisher.WithEpoch(2))
	if err := succ.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: pos.Offset}); err != nil {
		t.Fatal(err)
	}

	err = a.PublishLine(ctx, []byte(`{"n":40}`), 40)
	if !errors.Is(err, publisher.ErrFenced) || !strings.Contains(err.Error(), fmt.Sprintf("expected last sequence %d", aLast)) {
		t.Fatalf("zombie publish: %v, want ErrFenced with its expected sequence", err)
	}
	// Dead for good, without another try: even a cancelled context gives
	// ErrFenced, not a context error.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.PublishLine(dead, []byte(`{"n":50}`), 50); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("later publish: %v", err)
	}
	if err := a.PublishStatus(dead, protocol.Status{Status: protocol.StatusFailed}); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("later status: %v", err)
	}
	if a.LastSeq() != aLast {
		t.Fatalf("fenced chain moved its LastSeq to %d", a.LastSeq())
	}

	if err := succ.PublishLine(ctx, []byte(`{"n":40}`), 40); err != nil {
		t.Fatalf("successor: %v", err)
	}
	// Another zombie of epoch 1 publishes the very line the successor just
	// published: same Msg-Id, so R3 dedupes it and R1 finds it at the tip.
	// It is still not the zombie's message, and adopting it would let the
	// zombie extend the chain.
	zombie2 := publisher.NewChain(b.js, names, run, aLast, publisher.WithEpoch(1))
	if err := zombie2.PublishLine(ctx, []byte(`{"n":40}`), 40); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("zombie publishing the successor's line: %v, want ErrFenced", err)
	}
	want := []string{lineID(run, 10), lineID(run, 20), lineID(run, 30), run + ":status:attached:2:30", lineID(run, 40)}
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v", got, want)
	}
	for _, m := range ms[3:] {
		if m.get(protocol.HeaderEpoch) != "2" {
			t.Fatalf("message %d after the takeover has epoch %q: the zombie got through", m.seq, m.get(protocol.HeaderEpoch))
		}
	}
	sub.equals(t, ms)
}

// testLostAck: a publish that was stored but whose ack never arrived is
// sent again by a chain still at the previous sequence; it succeeds and
// nothing is stored twice (R3 answers a duplicate ack, R1 10071 resolved by
// reading the chain's last Msg-Id).
func testLostAck(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "lostack"
	sub := live(t, b, run)
	a := publisher.NewChain(b.js, names, run, 0)
	if err := a.PublishLine(ctx, []byte("one"), 4); err != nil {
		t.Fatal(err)
	}
	before := a.LastSeq()
	if err := a.PublishLine(ctx, []byte("two"), 8); err != nil {
		t.Fatal(err)
	}
	stored := a.LastSeq()

	retry := publisher.NewChain(b.js, names, run, before)
	if err := retry.PublishLine(ctx, []byte("two"), 8); err != nil {
		t.Fatalf("retry of a stored publish: %v", err)
	}
	if retry.LastSeq() != stored {
		t.Fatalf("after retry LastSeq %d, want the stored message's %d", retry.LastSeq(), stored)
	}
	if err := retry.PublishLine(ctx, []byte("three"), 14); err != nil {
		t.Fatalf("publish after the retry: %v", err)
	}
	// An older line sent again is on the chain already: success, and the
	// chain stays where it is.
	at := retry.LastSeq()
	if err := retry.PublishLine(ctx, []byte("one"), 4); err != nil || retry.LastSeq() != at {
		t.Fatalf("older line again: %v, LastSeq %d -> %d", err, at, retry.LastSeq())
	}
	// The same for a status (a terminal status is retried the same way).
	st := protocol.Status{Status: protocol.StatusSucceeded, Offset: 14}
	pre := retry.LastSeq()
	if err := retry.PublishStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := publisher.NewChain(b.js, names, run, pre).PublishStatus(ctx, st); err != nil {
		t.Fatalf("retry of a stored status: %v", err)
	}
	want := []string{lineID(run, 4), lineID(run, 8), lineID(run, 14), run + ":status:succeeded:0:14"}
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v", got, want)
	}
	sub.equals(t, ms)
}

// testLeaseTakeover is I1 end to end: a holder stalls, its liveness
// expires, a new holder wins the lease, aligns on the chain and writes
// "attached"; the old holder wakes up and cannot publish.
func testLeaseTakeover(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "takeover"
	// A's liveness is renewed over a connection of its own, cut below: A
	// stalls as far as NATS can tell, yet keeps its chain.
	anc, err := nats.Connect(b.nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer anc.Close()
	ajs, err := jetstream.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	aLeases, err := kv.Open[kv.LeaseRecord](ctx, ajs, names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	lva, err := lease.Live(ctx, ajs, aLeases, lease.Holder{Worker: "w-a", Node: "n"}, leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lva.Close(context.Background()) }()
	lvb, err := lease.Live(ctx, b.js, b.leases, lease.Holder{Worker: "w-b", Node: "n"}, leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lvb.Close(context.Background()) }()
	la, err := lva.Acquire(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Seq != 0 {
		t.Fatalf("Align of a new run = %+v, %v", pos, err)
	}
	a := publisher.NewChain(b.js, names, run, pos.Seq, publisher.WithEpoch(la.Epoch()))
	if err := a.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted}); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishLine(ctx, []byte(`{"n":1}`), 8); err != nil {
		t.Fatal(err)
	}
	anc.Close() // A stalls: no renewal, but it keeps its chain

	var lb *lease.Lease
	for deadline := time.Now().Add(5 * leaseTTL); ; {
		lb, err = lvb.Acquire(ctx, run)
		if err == nil {
			break
		}
		// ErrNotLive: B's own liveness lapsed under a loaded machine
		// (a fresh-clone CI once), and comes back with a new session.
		if !errors.Is(err, lease.ErrHeld) && !errors.Is(err, lease.ErrNotLive) || time.Now().After(deadline) {
			t.Fatalf("B could not take the lease: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("epochs %d then %d", la.Epoch(), lb.Epoch())
	}
	pos, err = publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Seq != a.LastSeq() || pos.Offset != 8 || pos.Kind != protocol.KindEvents {
		t.Fatalf("Align = %+v, %v", pos, err)
	}
	bc := publisher.NewChain(b.js, names, run, pos.Seq, publisher.WithEpoch(lb.Epoch()))
	if err := bc.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: pos.Offset}); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishLine(ctx, []byte(`{"n":2}`), 16); !errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("old holder's publish: %v, want ErrFenced", err)
	}
	if err := bc.PublishLine(ctx, []byte(`{"n":2}`), 16); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("%s:status:started:%d:0", run, la.Epoch()), lineID(run, 8),
		fmt.Sprintf("%s:status:attached:%d:8", run, lb.Epoch()), lineID(run, 16),
	}
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v", got, want)
	}
	if got := ms[3].get(protocol.HeaderEpoch); got != fmt.Sprint(lb.Epoch()) {
		t.Fatalf("line 2 published with epoch %s, want the new holder's %d", got, lb.Epoch())
	}
	if err := lb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

func testChunked(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "big"
	line := []byte(`{"blob":"` + strings.Repeat("0123456789abcdef", 3<<16) + `"}`) // just over 3 MiB
	end := int64(len(line) + 1)
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(3))
	if err := c.PublishLine(ctx, line, end); err != nil {
		t.Fatal(err)
	}
	ms := chain(t, b, run)
	limit := int(b.nc.MaxPayload())
	n := len(ms)
	if n < 4 || n > 5 {
		t.Fatalf("a %d-byte line with max payload %d went out as %d messages", len(line), limit, n)
	}
	var joined []byte
	for i, m := range ms {
		chunk := fmt.Sprintf("%d/%d", i+1, n)
		if m.subject != names.EventsSubject(run) || m.get(protocol.HeaderChunk) != chunk ||
			m.get(protocol.HeaderMsgID) != fmt.Sprintf("%s:%d:%s", run, end, chunk) ||
			m.get(protocol.HeaderOffset) != fmt.Sprint(end) || m.get(protocol.HeaderEpoch) != "3" {
			t.Fatalf("chunk %d: subject %s headers %v", i+1, m.subject, m.header)
		}
		if len(m.data) >= limit {
			t.Fatalf("chunk %d has %d bytes, max payload %d", i+1, len(m.data), limit)
		}
		joined = append(joined, m.data...)
	}
	if !bytes.Equal(joined, line) {
		t.Fatal("chunks do not concatenate to the line")
	}
	pos, err := publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Chunk != n || pos.Chunks != n || pos.Partial() || pos.Seq != c.LastSeq() || pos.Offset != end {
		t.Fatalf("Align after a whole chunked line = %+v, %v", pos, err)
	}
	if err := c.PublishLine(ctx, []byte("after"), end+6); err != nil {
		t.Fatalf("publish after chunks: %v", err)
	}

	// The same line read from a journal a chunk at a time goes out alike.
	journal := bytes.NewReader(append(append([]byte("earlier\n"), line...), '\n'))
	at := publisher.NewChain(b.js, names, "bigat", 0, publisher.WithEpoch(3))
	if err := at.PublishLineAt(ctx, journal, 8, end+8); err != nil {
		t.Fatal(err)
	}
	atMs := chain(t, b, "bigat")
	if len(atMs) != n {
		t.Fatalf("read from the journal: %d chunks, want %d", len(atMs), n)
	}
	for i, m := range atMs {
		if m.subject != names.EventsSubject("bigat") || !bytes.Equal(m.data, ms[i].data) || m.get(protocol.HeaderChunk) != ms[i].get(protocol.HeaderChunk) {
			t.Fatalf("chunk %d read from the journal differs: %s %v", i+1, m.subject, m.header)
		}
	}
	if err := at.PublishLineAt(ctx, journal, 8, 8); err == nil {
		t.Fatal("PublishLineAt took an empty range")
	}
}

// testResumeChunks: a holder died after publishing some chunks of a line;
// its successor aligns on the last chunk and publishes the rest.
func testResumeChunks(t *testing.T, b *backend) {
	ctx := ctxT(t)
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyz!") // 37 bytes: 4 chunks of at most 10
	const end = 100
	// A reference publish of the whole line gives the chunks as cut.
	ref := publisher.NewChain(b.js, names, "ref", 0, publisher.WithMaxPayload(10))
	if err := ref.PublishLine(ctx, line, end); err != nil {
		t.Fatal(err)
	}
	refChunks := chain(t, b, "ref")
	if len(refChunks) != 4 {
		t.Fatalf("reference: %d chunks", len(refChunks))
	}
	// deadHolder puts the first k chunks on run's chain, as the holder
	// that died did.
	deadHolder := func(run string, k int) {
		for _, m := range refChunks[:k] {
			h := nats.Header{}
			h.Set(protocol.HeaderOffset, m.get(protocol.HeaderOffset))
			h.Set(protocol.HeaderChunk, m.get(protocol.HeaderChunk))
			h.Set(protocol.HeaderMsgID, strings.Replace(m.get(protocol.HeaderMsgID), "ref:", run+":", 1))
			if _, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: names.IngestSubject(run, protocol.KindRaw), Header: h, Data: m.data}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(run string) {
		t.Helper()
		ms := chain(t, b, run)
		var joined []byte
		for i, m := range ms {
			if want := fmt.Sprintf("%s:%d:%d/4", run, end, i+1); m.get(protocol.HeaderMsgID) != want {
				t.Fatalf("%s chunk %d: Msg-Id %q, want %q", run, i+1, m.get(protocol.HeaderMsgID), want)
			}
			if !bytes.Equal(m.data, refChunks[i].data) {
				t.Fatalf("%s chunk %d is %q, cut differently from %q", run, i+1, m.data, refChunks[i].data)
			}
			joined = append(joined, m.data...)
		}
		if len(ms) != 4 || !bytes.Equal(joined, line) {
			t.Fatalf("%s: %d chunks joined to %q", run, len(ms), joined)
		}
	}

	deadHolder("resume", 2)
	pos, err := publisher.Align(ctx, b.js, names, "resume")
	if err != nil || pos.Chunk != 2 || pos.Chunks != 4 || !pos.Partial() || pos.Offset != end || pos.Kind != protocol.KindRaw {
		t.Fatalf("Align on a partial line = %+v, %v", pos, err)
	}
	c := publisher.NewChain(b.js, names, "resume", pos.Seq, publisher.WithMaxPayload(10))
	if err := c.PublishLineFrom(ctx, line, pos.Offset, 6); err == nil || errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("PublishLineFrom past the last chunk: %v", err)
	}
	if err := c.PublishLineFrom(ctx, line, pos.Offset, pos.Chunk+1); err != nil {
		t.Fatal(err)
	}
	check("resume")

	// ResumeLine cuts as the first publisher did, whatever its own size.
	deadHolder("resume2", 1)
	pos, err = publisher.Align(ctx, b.js, names, "resume2")
	if err != nil {
		t.Fatal(err)
	}
	c2 := publisher.NewChain(b.js, names, "resume2", pos.Seq, publisher.WithMaxPayload(1000))
	if err := c2.ResumeLine(ctx, line, publisher.Position{Seq: pos.Seq}); err == nil {
		t.Fatal("ResumeLine accepted a position that is not a chunk")
	}
	if err := c2.ResumeLine(ctx, line, pos); err != nil {
		t.Fatal(err)
	}
	check("resume2")

	// And ResumeLineAt, reading the line from its journal.
	deadHolder("resume3", 3)
	if pos, err = publisher.Align(ctx, b.js, names, "resume3"); err != nil {
		t.Fatal(err)
	}
	c3 := publisher.NewChain(b.js, names, "resume3", pos.Seq, publisher.WithMaxPayload(1000))
	start := int64(end - 1 - len(line)) // the line ends at end in its journal
	journal := bytes.NewReader(append([]byte(strings.Repeat("x", int(start)-1)+"\n"+string(line)), '\n'))
	if err := c3.ResumeLineAt(ctx, journal, start, publisher.Position{Seq: pos.Seq}); err == nil {
		t.Fatal("ResumeLineAt accepted a position that is not a chunk")
	}
	if err := c3.ResumeLineAt(ctx, journal, start, pos); err != nil {
		t.Fatal(err)
	}
	check("resume3")
}

// testInterruptedChunks: a chunked line whose publish is cut short is
// retried from its start; the chunks already stored are recognised and the
// chain ends up with each chunk once, in order.
func testInterruptedChunks(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "interrupted"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithMaxPayload(4))
	const n = 300
	line := []byte(strings.Repeat("0123", n))
	end := int64(len(line) + 1)
	// Cut the publish short once its 10th chunk goes by: the other 290
	// round trips take far longer than the cancellation.
	short, cancel := context.WithCancel(ctx)
	var seen atomic.Int32
	sub, err := b.nc.Subscribe(names.RawSubject(run), func(*nats.Msg) {
		if seen.Add(1) == 10 {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	err = c.PublishLine(short, line, end)
	cancel()
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	stored := len(chain(t, b, run))
	if err == nil || errors.Is(err, publisher.ErrFenced) || stored <= 0 || stored >= n {
		t.Fatalf("cut-short publish: %v with %d of %d chunks stored; want an error mid-line", err, stored, n)
	}
	if err := c.PublishLine(ctx, line, end); err != nil {
		t.Fatalf("retry of the line: %v", err)
	}
	ms := chain(t, b, run)
	var joined []byte
	for i, m := range ms {
		if want := fmt.Sprintf("%s:%d:%d/%d", run, end, i+1, n); m.get(protocol.HeaderMsgID) != want {
			t.Fatalf("message %d is %q, want %q", i, m.get(protocol.HeaderMsgID), want)
		}
		joined = append(joined, m.data...)
	}
	if len(ms) != n || !bytes.Equal(joined, line) {
		t.Fatalf("%d chunks stored after the retry, want %d joining to the line", len(ms), n)
	}
	if c.LastSeq() != ms[n-1].seq {
		t.Fatalf("LastSeq %d, last chunk at %d", c.LastSeq(), ms[n-1].seq)
	}
}

func testAlign(t *testing.T, b *backend) {
	ctx := ctxT(t)
	pos, err := publisher.Align(ctx, b.js, names, "never-published")
	if err != nil || pos != (publisher.Position{}) {
		t.Fatalf("Align of an empty run = %+v, %v", pos, err)
	}
	const run = "align"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(5))
	if err := c.PublishLine(ctx, []byte(`{"a":1}`), 42); err != nil {
		t.Fatal(err)
	}
	pos, err = publisher.Align(ctx, b.js, names, run)
	want := publisher.Position{Seq: c.LastSeq(), Offset: 42, MsgID: lineID(run, 42), Subject: names.EventsSubject(run), Kind: protocol.KindEvents, Epoch: 5}
	if err != nil || pos != want {
		t.Fatalf("Align after an event = %+v, %v; want %+v", pos, err, want)
	}
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusHandoff, Worker: "w", Node: "n", Offset: 42}); err != nil {
		t.Fatal(err)
	}
	pos, err = publisher.Align(ctx, b.js, names, run)
	if err != nil || pos.Seq != c.LastSeq() || pos.Kind != protocol.KindStatus || pos.Offset != 42 || pos.Status == nil {
		t.Fatalf("Align after a status = %+v, %v", pos, err)
	}
	if st := *pos.Status; st.Status != protocol.StatusHandoff || st.RunID != run || st.Epoch != 5 || st.Worker != "w" || st.Offset != 42 {
		t.Fatalf("aligned status %+v", st)
	}
	// Somebody publishes junk on the run's subject: Align says so and
	// still tells where the chain stands.
	ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: names.IngestSubject("junk", protocol.KindRaw), Data: []byte("no headers")})
	if err != nil {
		t.Fatal(err)
	}
	pos, err = publisher.Align(ctx, b.js, names, "junk")
	if !errors.Is(err, publisher.ErrBadPosition) || pos.Seq != ack.Sequence {
		t.Fatalf("Align on a message without offset = %+v, %v", pos, err)
	}
}

func testStatuses(t *testing.T, b *backend) {
	ctx := ctxT(t)
	const run = "status"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithEpoch(9))
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusStarted, Worker: "w", Node: "n"}); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishLine(ctx, []byte("out"), 4); err != nil {
		t.Fatal(err)
	}
	exit := 0
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusSucceeded, Epoch: 11, Offset: 4, ExitCode: &exit}); err != nil {
		t.Fatal(err)
	}
	ms := chain(t, b, run)
	if got, want := msgIDs(ms), []string{run + ":status:started:9:0", lineID(run, 4), run + ":status:succeeded:11:4"}; !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v", got, want)
	}
	for _, i := range []int{0, 2} {
		m := ms[i]
		st, err := protocol.ParseStatus(m.data)
		if err != nil {
			t.Fatal(err)
		}
		if m.subject != names.StatusSubject(run) || st.RunID != run || st.Time.IsZero() ||
			m.get(protocol.HeaderOffset) != fmt.Sprint(st.Offset) || m.get(protocol.HeaderEpoch) != "9" {
			t.Fatalf("status %d: %s %+v headers %v", i, m.subject, st, m.header)
		}
	}
	if st, _ := protocol.ParseStatus(ms[0].data); st.Epoch != 9 || st.Worker != "w" {
		t.Fatalf("started: %+v (epoch comes from the chain when unset)", st)
	}
	if st, _ := protocol.ParseStatus(ms[2].data); st.Epoch != 11 || st.ExitCode == nil || *st.ExitCode != 0 || !st.Status.Terminal() {
		t.Fatalf("succeeded: %+v", st)
	}
}

// TestServerRestart: publishes across a server restart are retried until
// they land, once; and a publish whose outcome the chain never learned is
// recognised when the chain goes on.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := testenv.RunServerIn(t, dir, -1)
	port := s.Addr().(*net.TCPAddr).Port
	nc, js := testenv.Connect(t, s)
	b := provisioned(t, nc, js, 1)
	ctx := ctxT(t)
	const run = "restart"
	c := publisher.NewChain(js, names, run, 0, publisher.WithAttemptTimeout(300*time.Millisecond))
	if err := c.PublishLine(ctx, []byte("before"), 7); err != nil {
		t.Fatal(err)
	}

	// 1. The server goes away during a publish and comes back.
	s.Shutdown()
	s.WaitForShutdown()
	done := make(chan error, 1)
	go func() { done <- c.PublishLine(ctx, []byte("during"), 14) }()
	time.Sleep(400 * time.Millisecond)
	s = testenv.RunServerIn(t, dir, port)
	if err := <-done; err != nil {
		t.Fatalf("publish across a restart: %v", err)
	}

	// 2. The server goes away again; this time the caller gives up. The
	// request waits in the client's reconnect buffer and lands once the
	// server is back, unbeknownst to the chain.
	s.Shutdown()
	s.WaitForShutdown()
	testenv.WaitFor(t, 10*time.Second, "the client to see the server gone", func() bool { return nc.Status() == nats.RECONNECTING })
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.PublishLine(short, []byte("lost ack"), 23)
	cancel()
	if err == nil || errors.Is(err, publisher.ErrFenced) {
		t.Fatalf("publish while the server is down: %v", err)
	}
	testenv.RunServerIn(t, dir, port)
	testenv.WaitFor(t, 10*time.Second, "the buffered publish to land", func() bool { return len(chain(t, b, run)) == 3 })
	// The caller goes on with a status: the chain finds its earlier
	// message at the tip and builds on it instead of calling itself fenced.
	if err := c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusHandoff, Offset: 23}); err != nil {
		t.Fatalf("status after a publish of unknown outcome: %v", err)
	}
	want := []string{lineID(run, 7), lineID(run, 14), lineID(run, 23), run + ":status:handoff:0:23"}
	ms := chain(t, b, run)
	if got := msgIDs(ms); !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v", got, want)
	}
	if c.LastSeq() != ms[3].seq {
		t.Fatalf("LastSeq %d, want %d", c.LastSeq(), ms[3].seq)
	}
}
