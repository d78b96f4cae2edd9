package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// Event is one message of a run's chain as a watcher sees it: an agent JSON
// line, a raw (non-JSON) line or a status. A line that was published in
// chunks arrives as one Event holding the whole line.
type Event struct {
	// Kind is the subject the message came on: events, raw, status,
	// input, egress or tool (or the last subject token, for a message some other
	// publisher put on the run's chain).
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
	// On an input (Kind input): EOF is set on the input after which the
	// agent's stdin was closed (its Data may be empty), Interrupt on an
	// interrupt, and InputSeq is the input's sequence in the run's input
	// stream (0 if the message has none).
	EOF, Interrupt bool
	InputSeq       uint64
	// Egress is the decoded connection when Kind is egress (one the run's
	// egress proxy decided); nil if the message's body is not one.
	Egress *journal.Egress
	// Tool is the decoded host tool call or answer when Kind is tool
	// (docs/tools.md); nil if the message's body is not one.
	Tool *protocol.ToolMessage
	// InputKind is an input's Baton-Input-Kind: "" for what a client
	// sent, protocol.InputKindInterrupt, or what baton itself wrote to an
	// agent with a policy: protocol.InputKindDecision (the answer to a
	// permission prompt, or its hold) and protocol.InputKindFollowUp
	// (the turn asking the agent to retry a request allowed after a hold).
	InputKind string
	// Approval is the permission prompt's approval id (Baton-Approval)
	// on a decision or follow-up input, and on a prompt line (Kind
	// events) of a run whose profile has a policy; Verdict is the
	// policy's verdict on such a prompt line (allow, ask, deny:
	// Baton-Verdict), Rule the rule that matched (Baton-Rule), and
	// DecidedBy who decided, on a decision or follow-up input
	// (protocol.DecidedByPolicy, protocol.DecidedByTimeout, or a
	// person's name: Baton-Decided-By).
	Approval, Verdict, Rule, DecidedBy string
}

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	fromSeq  uint64
	answered func(bool)
}

// FromSequence starts the watch at stream sequence seq instead of the start
// of the run's chain; pass the Seq of the last event handled, plus one, to
// resume after it.
func FromSequence(seq uint64) WatchOption {
	return func(o *watchOptions) { o.fromSeq = seq }
}

// OnWorkers has Watch call fn(false) when no worker answers its reads of
// the run's history (none runs, or all restart; it waits for one), and
// fn(true) when one answers again after that. The run's agent goes on
// meanwhile, and so do its live messages once a worker publishes them.
func OnWorkers(fn func(answering bool)) WatchOption {
	return func(o *watchOptions) { o.answered = fn }
}

// Watch replays the chain of runID from its start, then follows it live,
// calling fn for each event, raw line and status in chain order. It returns
// the run's terminal status once fn has handled it. It returns early with
// fn's error if fn fails, with ctx's error when ctx ends, and with an error
// wrapping ErrBrokenChunk if a chunked line cannot be put back together.
//
// A run that has not started yet has an empty chain: Watch waits for it.
//
// It needs no consumer: it subscribes to the run's live subjects first,
// then pages the history through the workers' read relay, then delivers
// the live messages; each message exactly once, in stream order (see
// watcher.live for the rule that finds a missed one).
func (c *Client) Watch(ctx context.Context, runID string, fn func(Event) error, opts ...WatchOption) (protocol.Status, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.Status{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	nc := c.js.Conn()
	live := make(chan *nats.Msg, liveBuffer)
	sub, err := nc.ChanSubscribe(c.names.RunFilter(runID), live)
	if err != nil {
		return protocol.Status{}, fmt.Errorf("watch %s: %w", runID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The subscription is in place before the first page is asked for, so
	// nothing stored after the page is missed live.
	fctx, cancel := context.WithTimeout(ctx, DefaultReadTimeout)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return protocol.Status{}, fmt.Errorf("watch %s: subscribe to %s: %w", runID, c.names.RunFilter(runID), err)
	}
	w := &watcher{c: c, runID: runID, fn: fn, asm: assembler{maxLine: c.maxLine}, answered: o.answered}
	if o.fromSeq > 0 {
		w.last = o.fromSeq - 1
	}
	// A watch begun before any worker answers (one submitted with the
	// job, a fleet restarting) waits for one, as it waits for the run's
	// events: until ctx ends, paging again every absentRetry.
	err = w.catchUp(ctx)
	if w.setAbsent(err != nil && relayAbsent(err)) {
		err = nil
	}
	if err != nil || w.end != nil {
		return w.result(err)
	}
	idle := time.NewTimer(w.idle())
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return w.result(ctx.Err())
		case m := <-live:
			err = w.live(ctx, m)
		case <-idle.C:
			// Nothing came for a while: page anyway, for what no live
			// message reveals (the last messages dropped by a slow
			// subscription, or published while reconnecting).
			err = w.catchUp(ctx)
		}
		// A watch outlives a worker restart: no relay answering now only
		// means paging again later; live messages that follow on go on
		// meanwhile.
		if w.setAbsent(err != nil && relayAbsent(err)) {
			err = nil
		}
		if err != nil || w.end != nil {
			return w.result(err)
		}
		idle.Reset(w.idle())
	}
}

const (
	// liveBuffer is how many live messages wait while a page is read;
	// past it the subscription drops them, and a page recovers them.
	liveBuffer = 4096
	// idlePage is how long a watch waits for a live message before it
	// pages anyway; gapRetry, when a page did not fill a known gap (a
	// lagging replica answered it).
	idlePage = 5 * time.Second
	gapRetry = 200 * time.Millisecond
	// absentRetry is how soon a watch pages again when no worker
	// answered (one is restarting).
	absentRetry = time.Second
)

// HeaderExpectedLastSubjectSeq is the publisher's fence, kept in the stored
// and republished message: the run's previous sequence, when
// HeaderExpectedLastSubjectSeqSubject is the run's filter.
const (
	HeaderExpectedLastSubjectSeq        = "Nats-Expected-Last-Subject-Sequence"
	HeaderExpectedLastSubjectSeqSubject = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// watcher is one Watch's state: last is the sequence of the last message
// handed to the assembler; end is set by the terminal status.
type watcher struct {
	c      *Client
	runID  string
	fn     func(Event) error
	asm    assembler
	last   uint64
	gap    bool // a live message named a gap the last page did not fill
	absent bool // the last page found no relay answering
	end    *protocol.Status
	fnErr  error
	// answered, if set, is told when absent changes (OnWorkers).
	answered func(bool)
}

// setAbsent records whether the last page found no relay answering, tells
// OnWorkers's function of a change, and returns absent.
func (w *watcher) setAbsent(absent bool) bool {
	if absent != w.absent && w.answered != nil {
		w.answered(!absent)
	}
	w.absent = absent
	return absent
}

// result is what Watch returns after err: fn's own error unchanged, any
// other one named by the watch.
func (w *watcher) result(err error) (protocol.Status, error) {
	switch {
	case w.fnErr != nil:
		return protocol.Status{}, w.fnErr
	case err != nil:
		return protocol.Status{}, fmt.Errorf("watch %s: %w", w.runID, err)
	}
	return *w.end, nil
}

func (w *watcher) idle() time.Duration {
	switch {
	case w.absent:
		return absentRetry
	case w.gap:
		return gapRetry
	}
	return idlePage
}

// catchUp pages the chain from last+1 until the relay has nothing more.
func (w *watcher) catchUp(ctx context.Context) error {
	w.gap = false
	return w.c.pages(ctx, w.c.names.ReadEventsSubject(w.runID), w.last+1, "", func(s stored) error {
		if w.end != nil || s.seq <= w.last {
			return nil
		}
		return w.add(part{subject: s.subject, seq: s.seq, header: s.header, data: s.data})
	})
}

// live handles a republished message. Its previous sequence on the run's
// chain is the publisher's fence header when the message carries one for
// the run's filter (every single fenced publish: the server keeps it in
// the stored and republished message), else seq-1 (the messages of an
// atomic batch, which carry none and are stored consecutively: only a
// batch's first message, when another run's came just before, is paged
// for without need, which is never wrong). Already handled: skipped. Previous at or below the last
// handled: nothing is missing, it is handled. Else some message between
// was not seen live: page from last+1.
func (w *watcher) live(ctx context.Context, m *nats.Msg) error {
	s, ok := storedOf(m)
	if !ok || s.stream != w.c.names.EventsStream() {
		return nil // not the stream's republish: trust nothing in it
	}
	s.subject = m.Subject
	if s.seq <= w.last {
		return nil
	}
	if prevSeq(w.c.names.RunFilter(w.runID), s) <= w.last {
		return w.add(part{subject: s.subject, seq: s.seq, header: s.header, data: s.data})
	}
	if err := w.catchUp(ctx); err != nil {
		return err
	}
	w.gap = s.seq > w.last && w.end == nil
	return nil
}

// prevSeq is the sequence of the message before s on the chain of filter.
func prevSeq(filter string, s stored) uint64 {
	if s.header.Get(HeaderExpectedLastSubjectSeqSubject) == filter {
		if p, err := strconv.ParseUint(s.header.Get(HeaderExpectedLastSubjectSeq), 10, 64); err == nil && p < s.seq {
			return p
		}
	}
	return s.seq - 1
}

// add hands the next message of the chain to the assembler, and a whole
// event to fn.
func (w *watcher) add(p part) error {
	w.last = p.seq
	ev, ok, err := w.asm.add(p)
	if err != nil || !ok {
		return err
	}
	if err := w.fn(ev); err != nil {
		w.fnErr = err
		return err
	}
	if ev.Status != nil && ev.Status.Status.Terminal() {
		w.end = ev.Status
	}
	return nil
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
	if ev.Kind == protocol.KindEgress {
		var e journal.Egress
		if json.Unmarshal(data, &e) == nil {
			ev.Egress = &e
		}
	}
	if ev.Kind == protocol.KindTool {
		var m protocol.ToolMessage
		if json.Unmarshal(data, &m) == nil {
			ev.Tool = &m
		}
	}
	if ev.Kind == protocol.KindInput {
		ev.EOF = p.header.Get(protocol.HeaderInputEOF) == "true"
		ev.InputKind = p.header.Get(protocol.HeaderInputKind)
		ev.Interrupt = ev.InputKind == protocol.InputKindInterrupt
		ev.InputSeq, _ = strconv.ParseUint(p.header.Get(protocol.HeaderInputSeq), 10, 64)
		ev.DecidedBy = p.header.Get(protocol.HeaderDecidedBy)
	}
	if ev.Kind == protocol.KindInput || ev.Kind == protocol.KindEvents {
		ev.Approval = p.header.Get(protocol.HeaderApproval)
		ev.Rule = p.header.Get(protocol.HeaderRule)
	}
	if ev.Kind == protocol.KindEvents {
		ev.Verdict = p.header.Get(protocol.HeaderVerdict)
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

// ChainStored reports whether any message of runID's chain is still in the
// events stream (a run that ended long ago has aged out of it).
func (c *Client) ChainStored(ctx context.Context, runID string) (bool, error) {
	var found bool
	_, err := c.page(ctx, c.names.ReadEventsSubject(runID), protocol.ReadRequest{Max: 1}, false, func(stored) error {
		found = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("run %s: %w", runID, err)
	}
	return found, nil
}
