package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// TestFenceHeaderKept documents the nats-server behaviour Watch's gap rule
// relies on: a fenced publish's Nats-Expected-Last-Subject-Sequence (and
// -Subject) is kept in the stored message and in its republished copy, and
// names the run's previous sequence. The messages of an atomic batch carry
// none (the server takes the batch's fence off its first message: seen on
// 2.15.2), and follow each other consecutively.
func TestFenceHeaderKept(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	const run = "fence-1"
	live := make(chan *nats.Msg, 64)
	sub, err := e.js.Conn().ChanSubscribe(names.RunFilter(run), live)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	ch := publisher.NewChain(e.js, names, run, 0, publisher.WithMinBatch(2))
	other := publisher.NewChain(e.js, names, "fence-other", 0)
	if err := ch.PublishLine(ctx, []byte(`{"n":1}`), 8); err != nil {
		t.Fatal(err)
	}
	if err := other.PublishLine(ctx, []byte(`{"noise":1}`), 12); err != nil {
		t.Fatal(err)
	}
	var lines []follow.Line
	for i := range 4 {
		lines = append(lines, follow.Line{Data: []byte(fmt.Sprintf(`{"b":%d}`, i)), End: int64(16 + 8*i)})
	}
	if err := ch.PublishLines(ctx, lines); err != nil {
		t.Fatal(err)
	}
	var prev uint64
	for i := range 5 {
		var m *nats.Msg
		select {
		case m = <-live:
		case <-ctx.Done():
			t.Fatalf("republished message %d not seen", i+1)
		}
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		st, err := e.res.Events.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]nats.Header{"republished": m.Header, "stored": st.Header} {
			exp, subj := h.Get(client.HeaderExpectedLastSubjectSeq), h.Get(client.HeaderExpectedLastSubjectSeqSubject)
			switch {
			case i <= 1 && (exp != strconv.FormatUint(prev, 10) || subj != names.RunFilter(run)):
				t.Errorf("%s message %d (seq %d): fence %q on %q, want %d on %q", name, i+1, seq, exp, subj, prev, names.RunFilter(run))
			case i >= 2 && exp != "", i > 2 && seq != prev+1:
				t.Errorf("%s batch message %d (seq %d, previous %d): fence %q, want none and consecutive", name, i+1, seq, prev, exp)
			}
		}
		prev = seq
	}
}

// TestWatchExactlyOnceHistoryAndLive: a watch that pages a long history
// while a burst is published, then loses live messages (its subscription
// overflows while fn is slow), sees every message of the run's chain once,
// in stream order, byte for byte as the stream holds them.
func TestWatchExactlyOnceHistoryAndLive(t *testing.T) {
	e := setup(t)
	// Some 8,000 publishes and three pages of history: more than ctxT's
	// 20 s under -race on a loaded 2-core machine (a fresh-clone CI beside
	// both soaks ran out of it publishing).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const run = "once-1"
	ch := publisher.NewChain(e.js, names, run, 0, publisher.WithMinBatch(4))
	noise := publisher.NewChain(e.js, names, "once-noise", 0)
	end := int64(0)
	line := func(i int) follow.Line {
		d := fmt.Appendf(nil, `{"i":%d}`, i)
		end += int64(len(d) + 1)
		return follow.Line{Data: d, End: end}
	}
	publishN := func(from, n int) {
		var batch []follow.Line
		for i := from; i < from+n; i++ {
			batch = append(batch, line(i))
			if len(batch) == 16 || i == from+n-1 {
				if err := ch.PublishLines(ctx, batch); err != nil {
					t.Error(err)
					return
				}
				batch = nil
				if err := noise.PublishLine(ctx, fmt.Appendf(nil, `{"noise":%d}`, i), int64(i+1)*16); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}
	// History: more than one page.
	publishN(0, 2*protocol.MaxReadMax+100)

	var mu sync.Mutex
	var got []client.Event
	firstHeld, liveHeld := make(chan struct{}), make(chan struct{})
	release1, release2 := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.c.Watch(ctx, run, func(ev client.Event) error {
			mu.Lock()
			got = append(got, ev)
			n := len(got)
			mu.Unlock()
			switch n {
			case 1: // paging the history: a burst goes out meanwhile
				close(firstHeld)
				<-release1
			case 2*protocol.MaxReadMax + 100 + 500 + 1: // the first live one
				close(liveHeld)
				<-release2
			}
			return nil
		})
		done <- err
	}()
	wait := func(c <-chan struct{}, what string) {
		select {
		case <-c:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	wait(firstHeld, "the first event of the history")
	publishN(2*protocol.MaxReadMax+100, 500)
	close(release1)
	// Caught up (all 500 paged or seen): the next ones come live, and fn
	// holds the first of them while more than the subscription buffers
	// are published, so some are dropped.
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2*protocol.MaxReadMax+100+500 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("watch saw %d events, want the history and the burst", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	publishN(2*protocol.MaxReadMax+600, 1)
	wait(liveHeld, "the first live event")
	var slow atomic.Int64
	e.js.Conn().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slow.Add(1)
		}
	})
	publishN(2*protocol.MaxReadMax+601, 5000)
	close(release2)
	off := end
	if err := ch.PublishStatus(ctx, protocol.Status{Status: protocol.StatusSucceeded, RunID: run, Offset: off, ExitCode: new(int)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Watch did not end at the terminal status")
	}
	if slow.Load() == 0 {
		t.Fatal("the live subscription dropped nothing: the test did not exercise a gap")
	}

	// The stream's own copy of the chain, read by an ordered consumer.
	cons, err := e.js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.RunFilter(run)}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	for i := range got {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("stream message %d: %v", i, err)
		}
		md, _ := m.Metadata()
		if g := got[i]; g.Seq != md.Sequence.Stream || !bytes.Equal(g.Data, m.Data()) || m.Subject() != names.Prefix()+".runs."+run+"."+string(g.Kind) {
			t.Fatalf("event %d: seq %d %s %q; stream holds seq %d %s %q", i, g.Seq, g.Kind, g.Data, md.Sequence.Stream, m.Subject(), m.Data())
		}
	}
	if want := 2*protocol.MaxReadMax + 601 + 5000 + 1; len(got) != want {
		t.Fatalf("watch saw %d events, the chain holds %d", len(got), want)
	}
}

// TestWatchOutlivesRelayRestart: once caught up, a watch goes on while no
// worker answers the relay (its idle page finds none), and pages again
// once one is back.
func TestWatchOutlivesRelayRestart(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	const run = "restart-1"
	ch := publisher.NewChain(e.js, names, run, 0)
	if err := ch.PublishLine(ctx, []byte(`{"n":0}`), 8); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		_, err := e.c.Watch(ctx, run, func(ev client.Event) error {
			seen <- string(ev.Data)
			return nil
		})
		done <- err
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("event %s, want %s", got, want)
			}
		case err := <-done:
			t.Fatalf("Watch ended waiting for %s: %v", want, err)
		case <-ctx.Done():
			t.Fatalf("event %s not seen", want)
		}
	}
	next(`{"n":0}`)
	e.stopRelay()
	if err := ch.PublishLine(ctx, []byte(`{"n":1}`), 16); err != nil {
		t.Fatal(err)
	}
	next(`{"n":1}`) // live, no gap: no page needed
	// Past the watch's idle page (5 s), which finds no relay: the watch
	// must go on.
	time.Sleep(6 * time.Second)
	e.startRelay(t)
	if err := ch.PublishStatus(ctx, protocol.Status{Status: protocol.StatusSucceeded, RunID: run, Offset: 16, ExitCode: new(int)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch across the relay's restart: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Watch did not end at the terminal status")
	}
}

// TestWatchWaitsForRelay: a watch begun while no worker answers the relay
// (submitted with its job, before the fleet is up) waits for one, then
// gets the whole chain from its start, the lines published meanwhile
// included.
func TestWatchWaitsForRelay(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	const run = "before-relay-1"
	e.stopRelay()
	ch := publisher.NewChain(e.js, names, run, 0)
	if err := ch.PublishLine(ctx, []byte(`{"n":0}`), 8); err != nil {
		t.Fatal(err)
	}
	var got []string
	done := make(chan error, 1)
	go func() {
		_, err := e.c.Watch(ctx, run, func(ev client.Event) error {
			got = append(got, string(ev.Data))
			return nil
		})
		done <- err
	}()
	// Its first page finds no relay: the watch must wait, not end.
	select {
	case err := <-done:
		t.Fatalf("Watch ended with no relay answering: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	e.startRelay(t)
	if err := ch.PublishLine(ctx, []byte(`{"n":1}`), 16); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishStatus(ctx, protocol.Status{Status: protocol.StatusSucceeded, RunID: run, Offset: 16, ExitCode: new(int)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch begun before the relay: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Watch did not end at the terminal status")
	}
	if want := []string{`{"n":0}`, `{"n":1}`}; len(got) != 3 || !slices.Equal(got[:2], want) {
		t.Fatalf("watch saw %q, want %q and the terminal status", got, want)
	}
}
