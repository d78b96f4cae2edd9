package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// Event is one message of a run's chain as a watcher sees it: an agent JSON
// line, a raw (non-JSON) line or a status. A line that was published in
// chunks arrives as one Event holding the whole line.
type Event struct {
	// Kind is the subject the message came on: events, raw or status (or
	// the last subject token, for a message some other publisher put on the
	// run's chain).
	Kind protocol.RunKind
	// Data is the payload unchanged: the line's bytes, or the status JSON.
	Data []byte
	// Offset is the journal offset of Baton-Offset, or -1 when the message
	// has none (or an unreadable one).
	Offset int64
	// Seq is the stream sequence of the message (of its last chunk, for a
	// chunked line); FromSequence(Seq+1) resumes after it.
	Seq uint64
	// Status is the decoded status when Kind is status.
	Status *protocol.Status
}

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	fromSeq uint64
}

// FromSequence starts the watch at stream sequence seq instead of the start
// of the run's chain; pass the Seq of the last event handled, plus one, to
// resume after it.
func FromSequence(seq uint64) WatchOption {
	return func(o *watchOptions) { o.fromSeq = seq }
}

// Watch replays the chain of runID from its start, then follows it live,
// calling fn for each event, raw line and status in chain order. It returns
// the run's terminal status once fn has handled it. It returns early with
// fn's error if fn fails, with ctx's error when ctx ends, and with an error
// wrapping ErrBrokenChunk if a chunked line cannot be put back together.
//
// A run that has not started yet has an empty chain: Watch waits for it.
func (c *Client) Watch(ctx context.Context, runID string, fn func(Event) error, opts ...WatchOption) (protocol.Status, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.Status{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.names.RunFilter(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if o.fromSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = o.fromSeq
	}
	cons, err := c.js.OrderedConsumer(ctx, c.names.EventsStream(), cfg)
	if err != nil {
		return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, hintNoStream(err, c.names.EventsStream()))
	}
	it, err := cons.Messages()
	if err != nil {
		return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, err)
	}
	defer it.Stop()
	// nats.go (v1.55) re-creates a lost ordered consumer without a bound
	// and without looking at Next's context; stopping the iterator is
	// what ends that, so the watch ends when ctx does.
	defer context.AfterFunc(ctx, it.Stop)()

	asm := assembler{maxLine: c.maxLine}
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, ctx.Err())
			}
			return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, err)
		}
		ev, ok, err := asm.add(part{
			subject: msg.Subject(),
			seq:     md.Sequence.Stream,
			header:  msg.Headers(),
			data:    msg.Data(),
		})
		if err != nil {
			return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, err)
		}
		if !ok {
			continue
		}
		if err := fn(ev); err != nil {
			return protocol.Status{}, err
		}
		if ev.Status != nil && ev.Status.Status.Terminal() {
			return *ev.Status, nil
		}
	}
}

// part is one message of a run's chain, as far as reassembly cares.
type part struct {
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
}

// assembler turns a run's messages into Events, joining the pieces of
// chunked lines. The pieces of a line are consecutive on the chain (the
// publisher fences them in order), so anything else in between is an error.
type assembler struct {
	maxLine int
	pending *pendingLine
}

type pendingLine struct {
	subject  string
	n, next  int // pieces in all; the piece expected next
	buf      []byte
	firstSeq uint64
}

// add takes the next message; ok is false while a chunked line is incomplete.
// After an error the assembler is spent: the chain cannot be trusted past it.
func (a *assembler) add(p part) (ev Event, ok bool, err error) {
	h := p.header.Get(protocol.HeaderChunk)
	if pl := a.pending; pl != nil {
		if h == "" || p.subject != pl.subject {
			return Event{}, false, fmt.Errorf("%w: line started at seq %d has %d of %d pieces, then seq %d is not its piece %d",
				ErrBrokenChunk, pl.firstSeq, pl.next-1, pl.n, p.seq, pl.next)
		}
	}
	if h == "" {
		return newEvent(p, p.data)
	}
	i, n, err := parseChunk(h)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: seq %d: %w", ErrBrokenChunk, p.seq, err)
	}
	pl := a.pending
	if pl == nil {
		if i != 1 {
			return Event{}, false, fmt.Errorf("%w: seq %d is piece %d/%d of a line whose first piece is missing", ErrBrokenChunk, p.seq, i, n)
		}
		if n == 1 {
			return newEvent(p, p.data)
		}
		pl = &pendingLine{subject: p.subject, n: n, next: 1, firstSeq: p.seq}
		a.pending = pl
	}
	if i != pl.next || n != pl.n {
		return Event{}, false, fmt.Errorf("%w: line started at seq %d expected piece %d/%d, seq %d is %d/%d",
			ErrBrokenChunk, pl.firstSeq, pl.next, pl.n, p.seq, i, n)
	}
	if len(pl.buf)+len(p.data) > a.maxLine {
		return Event{}, false, fmt.Errorf("%w: line started at seq %d is larger than %d bytes", ErrBrokenChunk, pl.firstSeq, a.maxLine)
	}
	pl.buf = append(pl.buf, p.data...)
	pl.next++
	if i < n {
		return Event{}, false, nil
	}
	a.pending = nil
	return newEvent(p, pl.buf)
}

// newEvent builds the Event of a whole line whose last message is p.
func newEvent(p part, data []byte) (Event, bool, error) {
	ev := Event{
		Kind:   protocol.RunKind(p.subject[strings.LastIndexByte(p.subject, '.')+1:]),
		Data:   data,
		Offset: parseOffset(p.header.Get(protocol.HeaderOffset)),
		Seq:    p.seq,
	}
	if ev.Kind == protocol.KindStatus {
		st, err := protocol.ParseStatus(data)
		if err != nil {
			return Event{}, false, fmt.Errorf("status message at seq %d is not a status: %w", p.seq, err)
		}
		ev.Status = &st
	}
	return ev, true, nil
}

// parseChunk reads a Baton-Chunk header "i/n", 1 <= i <= n.
func parseChunk(h string) (i, n int, err error) {
	a, b, found := strings.Cut(h, "/")
	if found {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !found || err != nil || i < 1 || n < 1 || i > n || a[0] == '+' || b[0] == '+' {
		return 0, 0, fmt.Errorf("bad %s header %q: want i/n with 1 <= i <= n", protocol.HeaderChunk, h)
	}
	return i, n, nil
}

// parseOffset reads Baton-Offset; -1 when absent or unreadable, since an
// offset only informs a watcher and a message without one is still delivered.
func parseOffset(h string) int64 {
	off, err := strconv.ParseInt(h, 10, 64)
	if err != nil || off < 0 {
		return -1
	}
	return off
}
