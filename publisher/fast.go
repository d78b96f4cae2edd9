package publisher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
)

// Fast batches (server 2.14+, AllowBatchPublish on the stream): the server
// stores each message as it comes, in the batch's order, and ends the
// batch at the first message that is missing ("gap: fail") or refused; its
// ack names how many it stored. An R1 file stream stages an atomic batch
// in a store of its own, fsynced at the commit; a fast batch has no such
// cost (docs/benchmarks.md, "Where a pipeline event's cycles go").
//
// A fast batch keeps the chain's guarantees this way:
//   - its first message expects the chain's tip on the run's filter, as
//     every fenced publish does: the batch starts right after the chain's
//     last message, or stores nothing;
//   - every other message expects the run's status subject to end at this
//     chain's own last status (statusSeq). Every holder's first message on
//     a chain it takes is a status (started, attached, or the terminal
//     status of a reaper), so a successor's first publish fails the rest
//     of a stale holder's batch (I1);
//   - a message is stored only after every earlier one of its batch was
//     stored or found a duplicate of a line already on the chain, so the
//     chain's lines stay in order with none missing (I2).
//
// Anything but the whole batch acknowledged goes to the atomic path for
// the same lines, which reads the chain's tip and settles what landed:
// messages of the fast batch still in flight are lines in the same order,
// either stored in turn or refused as duplicates.
const (
	// fastFlow is the flow-control interval the chain asks for: the
	// server acks every that many messages; the chain only waits for the
	// batch's final ack (a batch is at most DefaultBatchMessages).
	fastFlow = "500"
	// The server's error codes that mean fast batches cannot work here.
	errCodeFastDisabled  jetstream.ErrorCode = 10205 // the stream does not allow batch publish
	errCodeFastInvalid   jetstream.ErrorCode = 10206 // the reply pattern is not understood
	errCodeFastInvalidID jetstream.ErrorCode = 10207 // the batch id is not understood
)

// minFastServer is the oldest server with fast batches.
var minFastServer = [3]int{2, 14, 0}

// WithFastBatches lets the chain publish its backlog as fast batches when
// it knows the fence they need: for an events stream of one replica that
// allows batch publish (a replicated stream refuses a second expectation
// on a subject while one is in flight, and stages atomic batches in
// memory, which costs less than their fixed cost on an R1 file stream).
func WithFastBatches(on bool) Option { return func(o *options) { o.fast = on } }

// fastReady reports whether the next batch may go as a fast batch.
func (c *Chain) fastReady() bool {
	return c.o.fast && !c.noFast && c.statusSeq != 0 && versionAtLeast(c.serverVersion, minFastServer)
}

// publishFast publishes lines (two or more, none chunked, within the
// batch limits) as one fast batch, and advances lastSeq; on anything but
// the whole batch acknowledged it publishes them by publishBatch. It
// returns how many of lines it settled. It holds c.mu.
func (c *Chain) publishFast(ctx context.Context, lines []follow.Line) (int, error) {
	seq, err := c.sendFast(ctx, lines)
	if err == nil {
		c.known(seq)
		return len(lines), nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeFastDisabled, errCodeFastInvalid, errCodeFastInvalidID, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			// The stream does not take fast batches, or is replicated
			// (it refuses the second fenced message in flight).
			c.noFast = true
			c.o.log.Info().Err(err).Msg("fast batches refused; publishing atomic batches")
		}
	}
	// Any prefix of lines may have landed: the chain's next publish goes
	// on from one it finds at the tip. Messages of the batch still on
	// their way are ahead of that publish on the connection, and the
	// stream takes a connection's messages in order.
	c.doubtLines = lines
	c.o.log.Debug().Err(err).Int("lines", len(lines)).Msg("fast batch not acknowledged whole; settling its lines as an atomic batch")
	return c.publishBatch(ctx, lines)
}

// The server's flow messages of a fast batch that leave it going (one
// per so many messages stored, or a gap the batch ends at), as nats-server
// 2.15 encodes them; the others ("err") carry an error, as the final
// answer may.
var (
	flowAck = []byte(`{"type":"ack",`)
	flowGap = []byte(`{"type":"gap",`)
)

// fastReply is an answer to a fast batch that carries an error.
type fastReply struct {
	Error *jetstream.APIError `json:"error"`
}

// sendFast sends lines as one fast batch and returns the stream sequence of
// its last message, once the server acknowledged the whole batch.
func (c *Chain) sendFast(ctx context.Context, lines []follow.Line) (uint64, error) {
	nc := c.js.Conn()
	id := nextBatchID()
	inbox := nc.NewRespInbox() + "." + id + "." + fastFlow + ".fail."
	// The first answer that is not flow control ends the batch for us: its
	// ack, or an error (after which every later message of the batch is
	// refused, each with an answer of its own).
	final := make(chan []byte, 1)
	sub, err := nc.Subscribe(inbox+">", func(m *nats.Msg) {
		if bytes.HasPrefix(m.Data, flowAck) || bytes.HasPrefix(m.Data, flowGap) {
			return // flow control, or a gap: the final ack counts what was stored
		}
		select {
		case final <- m.Data:
		default:
		}
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	h := nats.Header{}
	off, msgID := []string{""}, []string{""}
	h[protocol.HeaderMsgID] = msgID
	h[protocol.HeaderOffset] = off
	if e := c.epochHeader(); e != "" {
		h[protocol.HeaderEpoch] = []string{e}
	}
	// The first message starts at the chain's tip; the others need the
	// run's status subject where this chain's last status left it.
	h[headerExpSeq] = []string{strconv.FormatUint(c.lastSeq.Load(), 10)}
	h[headerExpSubject] = []string{c.filter}
	msg := &nats.Msg{Header: h}
	for i, l := range lines {
		if i == 1 {
			h[headerExpSeq] = []string{strconv.FormatUint(c.statusSeq, 10)}
			h[headerExpSubject] = []string{c.names.StatusSubject(c.runID)}
		}
		msg.Subject = c.rawSubj
		if validJSON(l.Data) {
			msg.Subject = c.eventsSubj
		}
		msg.Data = l.Data
		off[0] = strconv.FormatInt(l.End, 10)
		msgID[0] = c.runID + ":" + off[0]
		op := "1" // append
		switch {
		case i == len(lines)-1:
			op = "2" // commit: the server acks the batch once it is stored
		case i == 0:
			op = "0" // start
		}
		msg.Reply = inbox + strconv.Itoa(i+1) + "." + op + ".$FI"
		if c.o.beforeFast != nil && !c.o.beforeFast(i) {
			continue
		}
		if err := nc.PublishMsg(msg); err != nil {
			return 0, err
		}
	}
	wait := time.NewTimer(c.attempt)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-wait.C:
		// As request does: a slow server is given longer next time.
		c.attempt = min(2*c.attempt, max(maxAttemptTimeout, c.o.attemptTimeout))
		return 0, fmt.Errorf("fast batch %s: %w", id, context.DeadlineExceeded)
	case data := <-final:
		c.attempt = max(c.o.attemptTimeout, c.attempt/2)
		var r fastReply
		if json.Unmarshal(data, &r) == nil && r.Error != nil {
			return 0, fmt.Errorf("nats: %w", r.Error)
		}
		ack, err := parseAck(data)
		if err != nil {
			return 0, err
		}
		return batchSeq(ack, id, len(lines))
	}
}
