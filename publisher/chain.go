package publisher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/leader"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
)

// ErrFenced: the server refused the chain's expected last sequence and the
// chain's last message is not ours: another publisher owns the chain.
var ErrFenced = errors.New("publisher: fenced: another publisher owns the run's chain")

const (
	// headerRoom is what a message's headers may take out of the server's
	// max payload: a Msg-Id with a 128-byte run id, the expected-sequence
	// pair with the filter, and baton's headers, with plenty to spare.
	headerRoom = 2048
	// Defaults of the retry loop.
	defaultRetryWait      = 25 * time.Millisecond
	maxRetryWait          = time.Second
	defaultAttemptTimeout = 2 * time.Second
	maxAttemptTimeout     = 16 * time.Second
	// maxDoubts bounds the Msg-Ids kept in doubt: more than a few distinct
	// publishes of unknown outcome between two known ones is pathological.
	maxDoubts = 64
)

// Option configures a Chain.
type Option func(*options)

type options struct {
	epoch          uint64
	maxPayload     int
	log            zerolog.Logger
	retryWait      time.Duration
	attemptTimeout time.Duration
	batchMessages  int
	batchBytes     int
	minBatch       int
	onFull         func(full bool)
	fast           bool
	beforeFast     func(i int) bool // tests: WithBeforeFastMessage
}

// WithEpoch stamps every message with the publisher's lease epoch
// (Baton-Epoch) and fills it into statuses that have none.
func WithEpoch(epoch uint64) Option { return func(o *options) { o.epoch = epoch } }

// WithLogger sets the logger for retries and fencing.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithOnStorageFull calls f(true) when the chain starts waiting because
// JetStream has no room for its messages, and f(false) when it stops
// waiting (the message was stored, or the publish's context ended): a
// worker counts its stalled runs with it.
func WithOnStorageFull(f func(full bool)) Option { return func(o *options) { o.onFull = f } }

// Chain publishes one run's messages on its fenced chain. Its methods may be
// called from several goroutines; they are serialised, one publish in
// flight.
type Chain struct {
	js        jetstream.JetStream
	names     protocol.Names
	runID     string
	filter    string
	epoch     uint64
	chunkSize int
	o         options
	lastSeq   atomic.Uint64

	// Where the chain is published: the stream stores and republishes
	// each message on the run's subjects (protocol.Names.IngestSubjects).
	eventsSubj, rawSubj, statusSubj string

	mu     sync.Mutex
	fenced error // set once: the chain is dead
	// doubts are the Msg-Ids of publishes whose outcome is unknown since
	// the chain last knew its tip: any of them may have landed.
	doubts []string
	// doubtLines are the lines of a fast batch whose outcome is unknown:
	// the server stores a prefix of them, so any may be the chain's tip.
	doubtLines []follow.Line
	// attempt is the current attempt timeout: it doubles while attempts
	// time out, so a slow server is not sent every message again and
	// again, and goes back down as answers come.
	attempt time.Duration
	// batchCap is the current most lines per batch: halved when a busy
	// server drops a batch, doubled back (up to the option) when one lands.
	batchCap int
	// noBatch: the stream refused atomic publish. serverVersion is the
	// version serverBatches was judged for.
	noBatch       bool
	serverVersion string
	serverBatches bool
	// fullSince is when the server said it had no room for the chain's
	// next message; zero while it has room.
	fullSince time.Time
	// statusSeq is the stream sequence of this chain's last status, while
	// it is known to be the last message on the run's status subject (0:
	// unknown): the fence of fast batches (fast.go). noFast: the stream
	// or its server refused a fast batch.
	statusSeq uint64
	noFast    bool
}

// NewChain returns the chain of runID whose last message is at stream
// sequence lastSeq (0 for a run with no message yet): from Align for a new
// holder, or from a released lease.
//
// A new holder's first publish must be a status (or the rest of the chunked
// line the chain ends with, which no fast batch can be behind): it is what
// fences the rest of a stale holder's fast batch (fast.go).
func NewChain(js jetstream.JetStream, names protocol.Names, runID string, lastSeq uint64, opts ...Option) *Chain {
	o := options{log: zerolog.Nop(), retryWait: defaultRetryWait, attemptTimeout: defaultAttemptTimeout,
		batchMessages: DefaultBatchMessages, batchBytes: DefaultBatchBytes, minBatch: DefaultMinBatch}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxPayload <= 0 {
		o.maxPayload = int(js.Conn().MaxPayload()) - headerRoom
	}
	c := &Chain{
		js: js, names: names, runID: runID, filter: names.RunFilter(runID),
		epoch: o.epoch, chunkSize: max(o.maxPayload, 1), o: o,
		eventsSubj: names.IngestSubject(runID, protocol.KindEvents),
		rawSubj:    names.IngestSubject(runID, protocol.KindRaw),
		statusSubj: names.IngestSubject(runID, protocol.KindStatus),
		attempt:    o.attemptTimeout, batchCap: o.batchMessages,
	}
	c.o.log = o.log.With().Str("run_id", runID).Logger()
	c.lastSeq.Store(lastSeq)
	return c
}

// LastSeq is the stream sequence of the chain's last message known to be
// ours.
func (c *Chain) LastSeq() uint64 { return c.lastSeq.Load() }

// PublishLine publishes one journal line ending at byte offset end: on the
// run's events subject when it is JSON, otherwise (empty and blank lines
// included) on its raw subject. A line longer than the chunk size goes out
// as n chunks in order, each with Baton-Chunk "i/n".
//
// After an error other than ErrFenced the outcome is unknown: call again
// with the same line and end. Whatever had been stored is recognised by its
// Msg-Id (within the stream's duplicates window) and not stored again, so a
// chunked line may be retried from its start.
func (c *Chain) PublishLine(ctx context.Context, line []byte, end int64) error {
	return c.PublishLineFrom(ctx, line, end, 1)
}

// PublishLineFrom publishes line like PublishLine, starting at chunk
// firstChunk: chunks 1..firstChunk-1 are already on the chain (Align
// reported chunk firstChunk-1 as the last message).
func (c *Chain) PublishLineFrom(ctx context.Context, line []byte, end int64, firstChunk int) error {
	return c.publishLine(ctx, memLine(line), end, firstChunk, c.chunks(int64(len(line))))
}

// PublishLineWith publishes line like PublishLine, with the headers h
// (a permission prompt's approval id, verdict and rule) on its message.
func (c *Chain) PublishLineWith(ctx context.Context, line []byte, end int64, h nats.Header) error {
	return c.publishLine(ctx, headedLine{memLine(line), h}, end, 1, c.chunks(int64(len(line))))
}

// ResumeLine finishes the chunked line that pos, the chain's last message,
// is a chunk of: line is the whole line, which ends at pos.Offset. It cuts
// the line exactly as its first publisher did, whatever this chain's chunk
// size.
func (c *Chain) ResumeLine(ctx context.Context, line []byte, pos Position) error {
	if err := resumable(pos); err != nil {
		return err
	}
	return c.publishLine(ctx, memLine(line), pos.Offset, pos.Chunk+1, pos.Chunks)
}

// PublishLineAt publishes, like PublishLine, the line held by r (a journal)
// from byte start up to its newline, which ends at end. It reads the line
// a chunk at a time, twice (first to tell JSON from raw), and never holds
// more of it than one chunk: a line of any length costs the chunk size in
// memory.
func (c *Chain) PublishLineAt(ctx context.Context, r io.ReaderAt, start, end int64) error {
	if start < 0 || end <= start {
		return fmt.Errorf("publisher: run %s: no line from %d to %d", c.runID, start, end)
	}
	return c.publishLine(ctx, &fileLine{r: r, start: start, length: end - 1 - start}, end, 1, c.chunks(end-1-start))
}

// ResumeLineAt is ResumeLine for a line held by r from byte start, read a
// chunk at a time like PublishLineAt.
func (c *Chain) ResumeLineAt(ctx context.Context, r io.ReaderAt, start int64, pos Position) error {
	if err := resumable(pos); err != nil {
		return err
	}
	if start < 0 || pos.Offset <= start {
		return fmt.Errorf("publisher: run %s: no line from %d to %d", c.runID, start, pos.Offset)
	}
	return c.publishLine(ctx, &fileLine{r: r, start: start, length: pos.Offset - 1 - start}, pos.Offset, pos.Chunk+1, pos.Chunks)
}

// resumable says why pos is not a chunk of a line to finish, if it is not.
func resumable(pos Position) error {
	if pos.Chunks < 2 || pos.Chunk < 1 || pos.Chunk > pos.Chunks {
		return fmt.Errorf("publisher: resume line: position %d is not a chunk (%d/%d)", pos.Seq, pos.Chunk, pos.Chunks)
	}
	return nil
}

func (c *Chain) chunks(size int64) int {
	if size <= int64(c.chunkSize) {
		return 1
	}
	return int((size + int64(c.chunkSize) - 1) / int64(c.chunkSize))
}

func (c *Chain) publishLine(ctx context.Context, line lineBody, end int64, first, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	return c.publishLineLocked(ctx, line, end, first, n)
}

// publishLineLocked is publishLine with c.mu held.
func (c *Chain) publishLineLocked(ctx context.Context, line lineBody, end int64, first, n int) error {
	if first < 1 || first > n+1 {
		return fmt.Errorf("publisher: line ending at %d: chunk %d of %d", end, first, n)
	}
	if n > 1 {
		// A piece the server could never have taken means n is not how
		// this line was cut: refuse it before sizing a buffer for it.
		if most, limit := (line.size()+int64(n)-1)/int64(n), c.js.Conn().MaxPayload(); limit > 0 && most > limit {
			return fmt.Errorf("publisher: run %s: line ending at %d cut in %d chunks of %d bytes, more than the server's max payload", c.runID, end, n, most)
		}
	}
	json, err := line.isJSON()
	if err != nil {
		return fmt.Errorf("publisher: run %s: read line ending at %d: %w", c.runID, end, err)
	}
	subject := c.rawSubj
	if json { // empty and blank lines are not JSON
		subject = c.eventsSubj
	}
	off := strconv.FormatInt(end, 10)
	for i := first; i <= n; i++ {
		h := c.header(off)
		if hl, ok := line.(headedLine); ok {
			for k, v := range hl.h {
				h[k] = v
			}
		}
		id := c.runID + ":" + off
		if n > 1 {
			chunk := strconv.Itoa(i) + "/" + strconv.Itoa(n)
			h.Set(protocol.HeaderChunk, chunk)
			id += ":" + chunk
		}
		data, err := line.piece(i, n)
		if err != nil {
			return fmt.Errorf("publisher: run %s: read chunk %d/%d of line ending at %d: %w", c.runID, i, n, end, err)
		}
		if _, err := c.publish(ctx, subject, data, id, h); err != nil {
			return err
		}
	}
	return nil
}

// pieceBounds are the offsets, within a line of size bytes, of chunk i
// (1-based) of n nearly equal parts. The cut depends only on the line's
// length and n, so a successor reproduces it from the "i/n" header alone.
func pieceBounds(size int64, i, n int) (from, to int64) {
	return int64(i-1) * size / int64(n), int64(i) * size / int64(n)
}

// lineBody is a line being published: whole in memory, or in the journal.
type lineBody interface {
	size() int64
	isJSON() (bool, error)
	piece(i, n int) ([]byte, error) // valid until the next call
}

type memLine []byte

// headedLine is a line whose message carries headers of its own.
type headedLine struct {
	memLine
	h nats.Header
}

func (l memLine) size() int64           { return int64(len(l)) }
func (l memLine) isJSON() (bool, error) { return validJSON(l), nil }
func (l memLine) piece(i, n int) ([]byte, error) {
	from, to := pieceBounds(int64(len(l)), i, n)
	return l[from:to], nil
}

// fileLine is a line read from r a chunk at a time into one buffer.
type fileLine struct {
	r             io.ReaderAt
	start, length int64
	buf           []byte
}

// scanBlock is how much of a long line isJSON reads at a time.
const scanBlock = 256 << 10

func (l *fileLine) size() int64 { return l.length }

func (l *fileLine) read(from, to int64) ([]byte, error) {
	if n := int(to - from); cap(l.buf) < n {
		l.buf = make([]byte, n)
	}
	b := l.buf[:to-from]
	if _, err := l.r.ReadAt(b, l.start+from); err != nil {
		return nil, err
	}
	return b, nil
}

func (l *fileLine) isJSON() (bool, error) {
	var s jsonStream
	for from := int64(0); from < l.length; from += scanBlock {
		b, err := l.read(from, min(from+scanBlock, l.length))
		if err != nil {
			return false, err
		}
		if !s.write(b) {
			return false, nil
		}
	}
	return s.valid(), nil
}

func (l *fileLine) piece(i, n int) ([]byte, error) {
	return l.read(pieceBounds(l.length, i, n))
}

// PublishStatus publishes st as JSON on the run's status subject, with
// Baton-Offset st.Offset and Msg-Id "<runId>:status:<status>:<epoch>:<offset>".
// An empty RunID, Epoch or Time is filled in from the chain and the clock.
func (c *Chain) PublishStatus(ctx context.Context, st protocol.Status) error {
	if st.RunID == "" {
		st.RunID = c.runID
	}
	if st.Epoch == 0 {
		st.Epoch = c.epoch
	}
	if st.Time.IsZero() {
		st.Time = time.Now().UTC()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	off := strconv.FormatInt(st.Offset, 10)
	id := fmt.Sprintf("%s:status:%s:%d:%s", c.runID, st.Status, st.Epoch, off)
	seq, err := c.publish(ctx, c.statusSubj, st.Marshal(), id, c.header(off))
	// The run's status subject now ends at our status, if we know where
	// it was stored: the fence of fast batches (fast.go).
	c.statusSeq = seq
	return err
}

func (c *Chain) header(offset string) nats.Header {
	h := nats.Header{}
	h.Set(protocol.HeaderOffset, offset)
	if e := c.epochHeader(); e != "" {
		h.Set(protocol.HeaderEpoch, e)
	}
	return h
}

// publish puts one message on the chain, fenced on lastSeq, and advances
// lastSeq. It holds c.mu. A message whose outcome is unknown (timeout, no
// responders, disconnection, or a concurrent fenced publish on the filter,
// 10164) or that a busy server refused (429) is sent again unchanged: same
// Msg-Id, same expectation. It returns the message's stream sequence when
// it knows this message is stored there, else 0 (a duplicate at or below
// the chain's tip: an older line published again).
func (c *Chain) publish(ctx context.Context, subject string, data []byte, id string, h nats.Header) (uint64, error) {
	expected := c.lastSeq.Load()
	wait := c.o.retryWait
	for {
		if err := ctx.Err(); err != nil {
			c.setFull(false, err)
			return 0, fmt.Errorf("publisher: run %s: publish %s: %w", c.runID, id, err)
		}
		h[protocol.HeaderMsgID] = []string{id}
		h[headerExpSeq] = []string{strconv.FormatUint(expected, 10)}
		h[headerExpSubject] = []string{c.filter}
		ack, err := c.request(ctx, &nats.Msg{Subject: subject, Data: data, Header: h})
		var apiErr *jetstream.APIError
		errors.As(err, &apiErr)
		if err != nil && apiErr == nil {
			c.doubt(id) // no answer: it may have been stored, or may still be
		}
		switch {
		case err == nil:
			if ack.Duplicate && ack.Sequence > expected {
				// Our Msg-Id was stored past our expectation (replicated
				// streams dedupe before checking it): by an attempt of ours
				// whose ack was lost, or by another publisher of the same
				// line. Only the former extends our chain.
				m, err := c.readMsg(ctx, ack.Sequence)
				if err != nil {
					c.doubt(id)
					return 0, err
				}
				if !c.mine(m, id) {
					return 0, c.fence(id, expected, m)
				}
			}
			// A duplicate at or below our expectation is an older line
			// published again: it is on the chain, which stays where it is.
			c.known(max(ack.Sequence, expected))
			if ack.Sequence <= expected {
				return 0, nil
			}
			return ack.Sequence, nil
		case apiErr != nil && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
			last, err := c.readMsg(ctx, 0)
			if err != nil {
				c.doubt(id)
				return 0, err
			}
			switch {
			case last.Sequence > expected && c.mine(last, id):
				// Stored by an earlier attempt whose ack was lost (single
				// servers check the expectation before dedupe).
				c.known(last.Sequence)
				return last.Sequence, nil
			case last.Sequence > expected && c.inDoubt(last):
				// An earlier publish of unknown outcome had landed after
				// all: go on from it.
				c.o.log.Debug().Str("msg_id", last.Header.Get(protocol.HeaderMsgID)).Uint64("seq", last.Sequence).Msg("earlier publish of unknown outcome was stored")
				expected = last.Sequence
				c.known(expected)
				continue
			default:
				return 0, c.fence(id, expected, last)
			}
		case storageFull(apiErr):
			// Refused, so not stored: the same message goes again once
			// there is room, however long that takes.
			c.setFull(true, err)
			clock.Sleep(ctx, wait)
			wait = min(2*wait, maxRetryWait)
		case retryable(err, apiErr):
			c.o.log.Debug().Err(err).Str("msg_id", id).Dur("wait", wait).Msg("publish outcome unknown; retrying")
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, maxRetryWait)
		default:
			c.setFull(false, err)
			return 0, fmt.Errorf("publisher: run %s: publish %s: %w", c.runID, id, err)
		}
	}
}

// known records that the chain's tip is at seq, every publish settled.
func (c *Chain) known(seq uint64) {
	c.lastSeq.Store(seq)
	c.doubts, c.doubtLines = c.doubts[:0], nil
	c.setFull(false, nil)
}

// JetStream's answers when it has no room for a message.
const (
	errCodeInsufficientResources jetstream.ErrorCode = 10023 // the server's store is full (max_file_store, max_memory_store)
	errCodeStorageExceeded       jetstream.ErrorCode = 10047 // the account's storage limit
	errCodeStoreFailed           jetstream.ErrorCode = 10077 // the store refused the message; the description says why
)

// storageFull tells the answers of a server with no room for a message:
// its store or the account's storage is full, or the stream is at its
// MaxBytes or MaxMsgs and discards new messages. Nothing of the message
// was stored, and room may come back (old messages age out, an operator
// purges), so the publisher waits for it rather than lose the message.
func storageFull(apiErr *jetstream.APIError) bool {
	if apiErr == nil {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeInsufficientResources, errCodeStorageExceeded:
		return true
	case errCodeStoreFailed:
		return strings.Contains(apiErr.Description, "maximum bytes exceeded") || strings.Contains(apiErr.Description, "maximum messages exceeded")
	}
	return false
}

// setFull records whether the chain waits for room in JetStream, saying
// so once per stall, in the log and to the WithOnStorageFull hook; why is
// the server's answer when the wait begins, and when it ends without the
// message stored, why it ended.
func (c *Chain) setFull(full bool, why error) {
	if full == !c.fullSince.IsZero() {
		return
	}
	if full {
		c.fullSince = time.Now()
		c.o.log.Warn().Err(why).Msg("JetStream has no room for the run's messages; publishing waits for space and loses nothing")
	} else {
		ev := c.o.log.Info()
		msg := "JetStream has room again; publishing resumes"
		if why != nil {
			ev, msg = c.o.log.Warn().Err(why), "stopped waiting for room in JetStream; the run's publishing will resume from the journal"
		}
		ev.Dur("waited", time.Since(c.fullSince)).Msg(msg)
		c.fullSince = time.Time{}
	}
	if c.o.onFull != nil {
		c.o.onFull(full)
	}
}

// doubt records id as a publish whose outcome is unknown: if it landed,
// the chain's tip may be it.
func (c *Chain) doubt(id string) {
	if slices.Contains(c.doubts, id) {
		return
	}
	if len(c.doubts) == maxDoubts {
		c.doubts = append(c.doubts[:0], c.doubts[1:]...)
	}
	c.doubts = append(c.doubts, id)
}

// inDoubt reports whether m is one of ours whose outcome was unknown.
func (c *Chain) inDoubt(m *jetstream.RawStreamMsg) bool {
	return slices.ContainsFunc(c.doubts, func(id string) bool { return c.mine(m, id) }) || c.storedLine(m, c.doubtLines) >= 0
}

// retryable tells the errors after which the same message is sent again.
func retryable(err error, apiErr *jetstream.APIError) bool {
	if apiErr != nil {
		// 10164: another fenced publish on the filter is in flight (R>1);
		// 503: JetStream briefly unavailable (leader election); 429: the
		// stream's ingest queue is full (the server is slower than its
		// publishers: waiting is the backpressure).
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant || apiErr.Code == 503 || apiErr.Code == 429
	}
	return errors.Is(err, context.DeadlineExceeded) || // the attempt's own timeout
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrReconnectBufExceeded)
}

// mine reports whether m is the message with Msg-Id id published under
// this chain's epoch. The epoch tells apart two holders publishing the same
// journal line (same Msg-Id): without WithEpoch only the Msg-Id is compared.
func (c *Chain) mine(m *jetstream.RawStreamMsg, id string) bool {
	return m.Header.Get(protocol.HeaderMsgID) == id && m.Header.Get(protocol.HeaderEpoch) == c.epochHeader()
}

func (c *Chain) epochHeader() string {
	if c.epoch == 0 {
		return ""
	}
	return strconv.FormatUint(c.epoch, 10)
}

// fence kills the chain: the message at m's sequence is not ours.
func (c *Chain) fence(id string, expected uint64, m *jetstream.RawStreamMsg) error {
	c.fenced = fmt.Errorf("%w: run %s: publish %s expected last sequence %d on %s; sequence %d is %q of epoch %q",
		ErrFenced, c.runID, id, expected, c.filter, m.Sequence, m.Header.Get(protocol.HeaderMsgID), m.Header.Get(protocol.HeaderEpoch))
	c.o.log.Warn().Err(c.fenced).Msg("chain fenced")
	c.setFull(false, c.fenced)
	return c.fenced
}

// readMsg reads the chain's message at seq, or its last message when seq is
// 0, from the stream leader, retrying transient failures until ctx ends.
func (c *Chain) readMsg(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	wait := c.o.retryWait
	for {
		msg, err := c.read(ctx, seq)
		if err == nil {
			return msg, nil
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Expected a sequence, and the message is gone (the chain is
			// empty, or aged out): this chain cannot go on.
			c.fenced = fmt.Errorf("%w: run %s: expected last sequence %d on %s; no message at %d (0: none on the chain): %w",
				ErrFenced, c.runID, c.lastSeq.Load(), c.filter, seq, err)
			return nil, c.fenced
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("publisher: run %s: read the chain: %w (last error: %w)", c.runID, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetryWait)
	}
}

func (c *Chain) read(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	actx, cancel := context.WithTimeout(ctx, c.o.attemptTimeout)
	defer cancel()
	if seq == 0 {
		return leader.Get(actx, c.js.Conn(), c.names.EventsStream(), 0, c.filter)
	}
	return leader.Get(actx, c.js.Conn(), c.names.EventsStream(), seq, "")
}
