package publisher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
)

// Atomic batch publishing (ADR-50, server 2.12+, AllowAtomicPublish on the
// events stream). Headers, and the server's error codes the chain acts on.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
	headerExpSeq      = "Nats-Expected-Last-Subject-Sequence"
	headerExpSubject  = "Nats-Expected-Last-Subject-Sequence-Subject"

	errCodeDuplicateInBatch  jetstream.ErrorCode = 10201 // a Msg-Id of the batch is in the dedupe window
	errCodeDuplicateInFlight jetstream.ErrorCode = 10158 // the same Msg-Id is being proposed (R>1)
	errCodeIncompleteBatch   jetstream.ErrorCode = 10176 // a message of the batch never arrived
	errCodeBatchTooLarge     jetstream.ErrorCode = 10199 // more messages than the server's batch limit
	errCodeAtomicDisabled    jetstream.ErrorCode = 10174 // the stream does not allow atomic publish
	errCodeTooManyBatches    jetstream.ErrorCode = 10210 // too many batches in flight on the stream or server (429)
)

// Defaults of batch publishing: ADR-50's 1,000 messages per batch; a byte
// bound that keeps one run's batch from taking a large share of the
// server's memory (an R1 file stream also stages it on disk); and the
// fewest lines worth a batch. A batch has a fixed cost on the server: on a
// single server with file storage it stages the batch in a store of its
// own, about 2.5 ms on 2 cores and an ext4 disk, the time of some 30 single
// publishes (docs/benchmarks-log.md); a replicated stream stages it in memory.
const (
	DefaultBatchMessages = 1000
	DefaultBatchBytes    = 4 << 20
	DefaultMinBatch      = 32
)

// WithMinBatch sets the fewest consecutive lines PublishLines sends as an
// atomic batch (default DefaultMinBatch); fewer go one message each, which
// costs less than a batch's fixed cost.
func WithMinBatch(n int) Option { return func(o *options) { o.minBatch = max(n, 2) } }

// batchIDs makes batch ids unique to this process: a random prefix and a
// counter, well under the server's 64 bytes.
var batchIDs = struct {
	prefix string
	n      atomic.Uint64
}{prefix: randomPrefix()}

func randomPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b[:]) + "-"
}

func nextBatchID() string {
	return batchIDs.prefix + strconv.FormatUint(batchIDs.n.Add(1), 36)
}

// minBatchServer is the oldest server whose atomic batches dedupe by
// Msg-Id (2.12.1); an older one would store a retried batch twice.
var minBatchServer = [3]int{2, 12, 1}

// PublishLines publishes journal lines, in order, like PublishLine for each:
// same subjects, Msg-Ids and headers. Consecutive lines go out as atomic
// batches (all or nothing, fenced by their first message, at most the
// chain's batch limits each), so a run's backlog costs one round trip per
// batch instead of one per line. A line longer than the chunk size goes
// out alone, in chunks. Every line needs its Data (a journal line with nil
// Data is refused).
//
// Retries and fencing keep PublishLine's rules: after an error other than
// ErrFenced the outcome is unknown, and the caller calls again with the
// same lines (or with those lines and more); what is already stored is
// recognised by its Msg-Id and epoch and not stored again. A batch of a
// publisher that lost the chain is refused whole.
func (c *Chain) PublishLines(ctx context.Context, lines []follow.Line) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	for i, l := range lines {
		if l.Data == nil {
			return fmt.Errorf("publisher: run %s: line ending at %d has no data (longer than the follower's max line): publish it with PublishLine", c.runID, l.End)
		}
		if i > 0 && l.End <= lines[i-1].End {
			return fmt.Errorf("publisher: run %s: line ending at %d follows one ending at %d", c.runID, l.End, lines[i-1].End)
		}
	}
	batching := len(lines) >= c.o.minBatch && c.batching()
	for len(lines) > 0 {
		n := 1
		if batching {
			n = c.batchLen(lines)
		}
		var err error
		if n < c.o.minBatch {
			for _, l := range lines[:n] {
				if err = c.publishLineLocked(ctx, memLine(l.Data), l.End, 1, c.chunks(int64(len(l.Data)))); err != nil {
					break
				}
			}
		} else if c.fastReady() {
			n, err = c.publishFast(ctx, lines[:n])
		} else {
			n, err = c.publishBatch(ctx, lines[:n])
		}
		if err != nil {
			return err
		}
		lines = lines[n:]
	}
	return nil
}

// batching reports whether this chain publishes atomic batches: allowed by
// its options, by the server it is connected to, and by the stream.
func (c *Chain) batching() bool {
	if c.o.batchMessages < 2 || c.noBatch {
		return false
	}
	// While reconnecting there is no server: keep the last judgement.
	if v := c.js.Conn().ConnectedServerVersion(); v != "" && v != c.serverVersion {
		c.serverVersion, c.serverBatches = v, versionAtLeast(v, minBatchServer)
	}
	return c.serverBatches
}

// versionAtLeast compares a server version "x.y.z[-pre]" with min.
func versionAtLeast(v string, min [3]int) bool {
	v, _, _ = strings.Cut(v, "-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}

// batchLen is how many of lines, from the first, fit one batch: within the
// limits, and stopping before a line that needs chunks (it goes alone).
func (c *Chain) batchLen(lines []follow.Line) int {
	size := 0
	for i, l := range lines {
		size += len(l.Data)
		if i == c.batchCap || len(l.Data) > c.chunkSize || (i > 0 && size > c.o.batchBytes) {
			return max(i, 1)
		}
	}
	return len(lines)
}

// publishBatch publishes a prefix of lines (two or more, none chunked,
// within the limits) as one atomic batch, fenced on lastSeq, and advances
// lastSeq. It returns how many of lines it settled: all of them, or fewer
// when a busy server made it send a smaller batch. It holds c.mu.
func (c *Chain) publishBatch(ctx context.Context, all []follow.Line) (int, error) {
	lines := all // what the next attempt sends: a prefix of all
	expected := c.lastSeq.Load()
	wait := c.o.retryWait
	lastID := func() string { return c.lineID(lines[len(lines)-1].End) }
	// fallBack publishes lines one message at a time, the path that
	// settles any line whatever happened before: an attempt of unknown
	// outcome that lands meanwhile is in doubt, and recognised.
	fallBack := func() (int, error) { return len(lines), c.publishEach(ctx, lines) }
	for {
		if err := ctx.Err(); err != nil {
			c.setFull(false, err)
			return 0, fmt.Errorf("publisher: run %s: publish batch up to %s: %w", c.runID, lastID(), err)
		}
		seq, err := c.sendBatch(ctx, lines, expected)
		var apiErr *jetstream.APIError
		errors.As(err, &apiErr)
		code := jetstream.ErrorCode(0)
		if apiErr != nil {
			code = apiErr.ErrorCode
		} else if err != nil {
			c.doubt(lastID()) // no answer: it may have been stored, or may still be
		}
		switch {
		case err == nil:
			c.known(seq)
			c.batchCap = min(c.o.batchMessages, 2*c.batchCap)
			return len(lines), nil
		case code == jetstream.JSErrCodeStreamWrongLastSequence || code == errCodeDuplicateInBatch:
			// The chain moved past our expectation, or a line of the batch
			// is already stored: by us (an attempt whose ack was lost),
			// or by a successor. The chain's last message tells which.
			last, err := c.readMsg(ctx, 0)
			if err != nil {
				return 0, err
			}
			if last.Sequence > expected {
				if i := c.storedLine(last, all); i >= 0 {
					// all[:i+1] are on the chain: a batch is all or
					// nothing, and each attempt starts at the chain's tip.
					c.known(last.Sequence)
					return i + 1, nil
				}
				if c.inDoubt(last) {
					// An earlier publish of unknown outcome had landed.
					c.o.log.Debug().Str("msg_id", last.Header.Get(protocol.HeaderMsgID)).Uint64("seq", last.Sequence).Msg("earlier publish of unknown outcome was stored")
					expected = last.Sequence
					c.known(expected)
					continue
				}
			}
			if code == errCodeDuplicateInBatch && last.Sequence == expected {
				// The chain is where we left it, and a line of the batch
				// was stored below its tip: an older line sent again.
				return fallBack()
			}
			return 0, c.fence(lastID(), expected, last)
		case code == errCodeBatchTooLarge && len(lines) > 1:
			// The server allows fewer messages per batch than we
			// thought: halve for good.
			c.o.batchMessages = max(len(lines)/2, 1)
			c.batchCap = min(c.batchCap, c.o.batchMessages)
			c.o.log.Info().Int("batch", c.o.batchMessages).Msg("server refused the batch size; publishing smaller batches")
			lines = lines[:c.o.batchMessages]
		case code == errCodeAtomicDisabled:
			c.noBatch = true
			c.o.log.Warn().Msg("the events stream does not allow atomic publish; publishing one line at a time")
			return fallBack()
		case storageFull(apiErr):
			// Nothing of it is stored: send it again once there is room.
			c.setFull(true, err)
			clock.Sleep(ctx, wait)
			wait = min(2*wait, maxRetryWait)
		case overloaded(code, apiErr):
			// The server dropped the batch (nothing of it is stored):
			// send half as much, after a pause, down to the fewest lines
			// worth a batch; then one line at a time, which always fits.
			if len(lines) <= c.o.minBatch {
				return fallBack()
			}
			c.batchCap = max(c.o.minBatch, len(lines)/2)
			lines = lines[:c.batchCap]
			c.o.log.Debug().Err(err).Int("batch", len(lines)).Dur("wait", wait).Msg("server busy; sending a smaller batch")
			if !clock.Sleep(ctx, wait) {
				continue // the loop's ctx check returns
			}
			wait = min(2*wait, maxRetryWait)
		case retryable(err, apiErr) || code == errCodeDuplicateInFlight:
			c.o.log.Debug().Err(err).Str("msg_id", lastID()).Dur("wait", wait).Msg("batch outcome unknown; retrying")
			clock.Sleep(ctx, wait)
			wait = min(2*wait, maxRetryWait)
		default:
			c.setFull(false, err)
			return 0, fmt.Errorf("publisher: run %s: publish batch up to %s: %w", c.runID, lastID(), err)
		}
	}
}

// overloaded tells the answers of a server that dropped a batch: some of
// it (a message the server refuses gets no answer unless it is the
// commit, so the commit finds the batch incomplete), or all of it because
// it is busy (429: a full ingest queue, too many batches in flight).
func overloaded(code jetstream.ErrorCode, apiErr *jetstream.APIError) bool {
	return code == errCodeIncompleteBatch || code == errCodeTooManyBatches || (apiErr != nil && apiErr.Code == 429)
}

// publishEach publishes lines one message at a time.
func (c *Chain) publishEach(ctx context.Context, lines []follow.Line) error {
	for _, l := range lines {
		if err := c.publishLineLocked(ctx, memLine(l.Data), l.End, 1, 1); err != nil {
			return err
		}
	}
	return nil
}

// storedLine returns the index of the line of lines that m, a message of
// this chain's epoch, is; or -1.
func (c *Chain) storedLine(m *jetstream.RawStreamMsg, lines []follow.Line) int {
	if m.Header.Get(protocol.HeaderEpoch) != c.epochHeader() {
		return -1
	}
	rest, ok := strings.CutPrefix(m.Header.Get(protocol.HeaderMsgID), c.runID+":")
	if !ok {
		return -1
	}
	end, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || strconv.FormatInt(end, 10) != rest {
		return -1
	}
	for i, l := range lines {
		if l.End == end {
			return i
		}
	}
	return -1
}

func (c *Chain) lineID(end int64) string { return c.runID + ":" + strconv.FormatInt(end, 10) }

// batchHeader holds one header map for every message of a batch: the
// client encodes a message's headers when it is published, so the values
// can change in place for the next one.
type batchHeader struct {
	h                                     nats.Header
	id, off, seq, commit, expSeq, expSubj [1]string
	msgID                                 [1]string
}

func (c *Chain) newBatchHeader(batchID string, expected uint64) *batchHeader {
	b := &batchHeader{h: make(nats.Header, 9)}
	b.id[0], b.commit[0] = batchID, "1"
	b.expSeq[0], b.expSubj[0] = strconv.FormatUint(expected, 10), c.filter
	b.h[headerBatchID] = b.id[:]
	b.h[headerBatchSeq] = b.seq[:]
	b.h[protocol.HeaderMsgID] = b.msgID[:]
	b.h[protocol.HeaderOffset] = b.off[:]
	if e := c.epochHeader(); e != "" {
		b.h[protocol.HeaderEpoch] = []string{e}
	}
	b.h[headerExpSeq] = b.expSeq[:]
	b.h[headerExpSubject] = b.expSubj[:]
	return b
}

// sendBatch sends lines as one atomic batch whose first message expects
// the chain's last sequence to be expected, and returns the sequence of its
// last message. Only the commit asks for a reply: the server checks every
// message at the commit and answers for the whole batch.
func (c *Chain) sendBatch(ctx context.Context, lines []follow.Line, expected uint64) (uint64, error) {
	nc := c.js.Conn()
	id := nextBatchID()
	bh := c.newBatchHeader(id, expected)
	msg := &nats.Msg{Header: bh.h}
	for i, l := range lines {
		msg.Subject = c.rawSubj
		if validJSON(l.Data) { // empty and blank lines are not JSON
			msg.Subject = c.eventsSubj
		}
		msg.Data = l.Data
		bh.off[0] = strconv.FormatInt(l.End, 10)
		bh.msgID[0] = c.runID + ":" + bh.off[0]
		bh.seq[0] = strconv.Itoa(i + 1)
		if i == 1 {
			// ADR-50: only the first message may carry the expectation.
			delete(bh.h, headerExpSeq)
			delete(bh.h, headerExpSubject)
		}
		if i < len(lines)-1 {
			if err := nc.PublishMsg(msg); err != nil {
				return 0, err
			}
			continue
		}
		bh.h[headerBatchCommit] = bh.commit[:]
	}
	ack, err := c.request(ctx, msg)
	if err != nil {
		return 0, err
	}
	return batchSeq(ack, id, len(lines))
}

// batchSeq is the sequence of a batch's last message from the ack of its
// commit, which must name the batch and its size: a server that ignored
// the batch headers would ack the last message alone, and the chain must
// not believe the batch was atomic.
func batchSeq(ack pubAck, id string, n int) (uint64, error) {
	if ack.BatchID != id || ack.Count != n {
		return 0, fmt.Errorf("%w: batch %s of %d messages acknowledged as batch %q of %d", jetstream.ErrInvalidJSAck, id, n, ack.BatchID, ack.Count)
	}
	return ack.Sequence, nil
}

// pubAck is the stream's answer to a publish or a batch's commit.
type pubAck struct {
	Error     *jetstream.APIError `json:"error,omitempty"`
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	BatchID   string              `json:"batch,omitempty"`
	Count     int                 `json:"count,omitempty"`
}

// request sends msg, its headers complete, and waits (at most the current
// attempt timeout, which it adapts) for the stream's answer. The client encodes msg before it
// returns, so the caller may change msg and its headers afterwards.
func (c *Chain) request(ctx context.Context, msg *nats.Msg) (pubAck, error) {
	actx, cancel := context.WithTimeout(ctx, c.attempt)
	defer cancel()
	resp, err := c.js.Conn().RequestMsgWithContext(actx, msg)
	switch {
	case err == nil:
		c.attempt = max(c.o.attemptTimeout, c.attempt/2)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		c.attempt = min(2*c.attempt, max(maxAttemptTimeout, c.o.attemptTimeout))
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return pubAck{}, jetstream.ErrNoStreamResponse
		}
		return pubAck{}, err
	}
	return parseAck(resp.Data)
}

// parseAck reads the stream's answer: an ack with its sequence, or the
// server's error.
func parseAck(data []byte) (pubAck, error) {
	var ack pubAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return pubAck{}, fmt.Errorf("%w: %w", jetstream.ErrInvalidJSAck, err)
	}
	if ack.Error != nil {
		return pubAck{}, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" || ack.Sequence == 0 {
		return pubAck{}, fmt.Errorf("%w: %q", jetstream.ErrInvalidJSAck, data)
	}
	return ack, nil
}
