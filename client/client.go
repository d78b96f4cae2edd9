package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

var (
	// ErrNotFound means no run record has the given runId.
	ErrNotFound = errors.New("client: run not found")
	// ErrTerminal means the run has already ended, so there is nothing to cancel.
	ErrTerminal = errors.New("client: run already ended")
	// ErrNoWorker means no worker answered a cancel request in time.
	ErrNoWorker = errors.New("client: no worker answered")
	// ErrDuplicate means the stream already held a job with this runId
	// (within its duplicates window): the run was submitted before. Callers
	// that retry a submission may treat it as success.
	ErrDuplicate = errors.New("client: job already submitted")
	// ErrBrokenChunk means a chunked line on a run's chain cannot be put back
	// together: a malformed Baton-Chunk header, a piece missing or out of
	// order, or a line larger than the client's limit.
	ErrBrokenChunk = errors.New("client: broken chunked line")
)

// DefaultMaxLineBytes bounds a reassembled line, so a bogus "1/1000000"
// chunk header cannot make a watcher buffer without limit.
const DefaultMaxLineBytes = 64 << 20

// Client talks to one baton deployment. It is safe for concurrent use.
type Client struct {
	js      jetstream.JetStream
	names   protocol.Names
	maxLine int
	mu      sync.Mutex
	runs    *kv.Runs // opened on first use
}

// Option configures a Client.
type Option func(*Client)

// WithMaxLineBytes bounds the size of a line Watch reassembles from chunks
// (default DefaultMaxLineBytes); a longer one is an ErrBrokenChunk.
func WithMaxLineBytes(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxLine = n
		}
	}
}

// New returns a client of the deployment named by names.
func New(js jetstream.JetStream, names protocol.Names, opts ...Option) *Client {
	c := &Client{js: js, names: names, maxLine: DefaultMaxLineBytes}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Names returns the names the client was created with.
func (c *Client) Names() protocol.Names { return c.names }

// Submit publishes job on the run-job subject with Nats-Msg-Id set to its
// runId and waits for the stream's ack. A job that would be rejected for
// its own content (see protocol.Job.Validate) is not sent: the error wraps
// the protocol's rejection sentinel. If the stream already held a job
// with that runId, it returns an error wrapping ErrDuplicate: the run was
// submitted before, and no second run will start.
func (c *Client) Submit(ctx context.Context, job protocol.Job) error {
	body, err := protocol.EncodeJob(job) // validates, so a bad job never leaves
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	ack, err := c.js.Publish(ctx, c.names.RunJobSubject(), body,
		jetstream.WithMsgID(job.RunID),
		jetstream.WithExpectStream(c.names.JobsStream()))
	if err != nil {
		return fmt.Errorf("submit %s: %w", job.RunID, hintNoStream(err, c.names.JobsStream()))
	}
	if ack.Duplicate {
		return fmt.Errorf("%w: run %s (stream %s seq %d)", ErrDuplicate, job.RunID, ack.Stream, ack.Sequence)
	}
	return nil
}

// Run returns the record of runID, or an error wrapping ErrNotFound.
func (c *Client) Run(ctx context.Context, runID string) (kv.RunRecord, error) {
	if !protocol.ValidRunID(runID) {
		return kv.RunRecord{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	runs, err := c.runStore(ctx)
	if err != nil {
		return kv.RunRecord{}, err
	}
	rec, _, err := runs.Get(ctx, runID)
	if errors.Is(err, kv.ErrNotFound) {
		return kv.RunRecord{}, fmt.Errorf("%w: %s", ErrNotFound, runID)
	}
	if err != nil {
		return kv.RunRecord{}, fmt.Errorf("run %s: %w", runID, err)
	}
	return rec, nil
}

// Runs returns every run record, newest first (by CreatedAt, then runId).
// Records that cannot be decoded are left out and reported in an error
// wrapping kv.ErrDecode, which comes with the other records.
func (c *Client) Runs(ctx context.Context) ([]kv.RunRecord, error) {
	// Read with a filtered consumer, not a KV watch, so a client user
	// needs no right to delete consumers (deploy/nats-auth.conf).
	all, err := kv.ReadAll[kv.RunRecord](ctx, c.js, c.names.RunsBucket())
	if all == nil {
		return nil, fmt.Errorf("list runs: %w", hintNoStream(err, c.names.RunsBucket()))
	}
	out := make([]kv.RunRecord, 0, len(all))
	for _, e := range all {
		out = append(out, e.Value)
	}
	slices.SortFunc(out, func(a, b kv.RunRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.RunID, b.RunID)
	})
	if err != nil {
		return out, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// DefaultCancelTimeout bounds a cancel request when ctx has no earlier
// deadline.
const DefaultCancelTimeout = 10 * time.Second

// Cancel asks the workers to cancel runID: one of them checks the run and
// records the intent in its record, and whichever worker holds the run, now
// or later, stops the agent. It returns the worker's answer; an error
// wrapping ErrNotFound if there is no such run, ErrTerminal if it already
// ended, or ErrNoWorker if no worker answered within DefaultCancelTimeout
// (or ctx). Cancelling twice is harmless.
func (c *Client) Cancel(ctx context.Context, runID string) (protocol.CancelReply, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.CancelReply{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, DefaultCancelTimeout)
	defer cancel()
	msg, err := c.js.Conn().RequestWithContext(ctx, c.names.CancelSubject(runID), nil)
	switch {
	case parent.Err() != nil: // the caller's end, not ours
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: %w", runID, parent.Err())
	case errors.Is(err, nats.ErrNoResponders):
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: %w: nobody listens on %s (is a `baton worker` running?)",
			runID, ErrNoWorker, c.names.CancelSubject(runID))
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: %w within %v", runID, ErrNoWorker, DefaultCancelTimeout)
	case err != nil:
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: %w", runID, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		switch code {
		case protocol.CancelNotFound:
			return protocol.CancelReply{}, fmt.Errorf("%w: %s", ErrNotFound, runID)
		case protocol.CancelTerminal:
			return protocol.CancelReply{}, fmt.Errorf("%w: %s", ErrTerminal, desc)
		}
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: refused (%s): %s", runID, code, desc)
	}
	var rep protocol.CancelReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.CancelReply{}, fmt.Errorf("cancel %s: unreadable answer %q: %w", runID, msg.Data, err)
	}
	return rep, nil
}

func (c *Client) runStore(ctx context.Context) (*kv.Runs, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs != nil {
		return c.runs, nil
	}
	s, err := kv.Open[kv.RunRecord](ctx, c.js, c.names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("open run records: %w", hintNoStream(err, c.names.RunsBucket()))
	}
	c.runs = s
	return s, nil
}

// hintNoStream tells a person what a missing stream or bucket usually means.
func hintNoStream(err error, name string) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("%w (is %s provisioned? a `baton worker` creates it on start)", err, name)
	}
	return err
}

// DLQEntry is one job rejected to the dead-letter stream.
type DLQEntry struct {
	Seq     uint64          // sequence in the DLQ stream
	Time    time.Time       // when it was rejected
	Reason  protocol.Reason // machine-readable reason code
	Error   string          // explanation for a person
	Subject string          // subject the job was published on
	MsgID   string          // its Nats-Msg-Id, if it had one
	Payload []byte          // the job as received, or its first bytes when Truncated
	// Truncated is the job's size when it did not fit the server's max
	// payload beside the DLQ's headers, and Payload holds its first bytes
	// only; Digest is then the whole job's "sha256:<hex>". 0: whole.
	Truncated int64
	Digest    string
}

// DLQ returns the newest limit entries of the dead-letter stream, newest
// first; limit <= 0 returns them all.
func (c *Client) DLQ(ctx context.Context, limit int) ([]DLQEntry, error) {
	name := c.names.DLQStream()
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", hintNoStream(err, name))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", name, err)
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	if limit <= 0 || uint64(limit) > info.State.Msgs {
		limit = int(info.State.Msgs)
	}
	// Read windows backwards from the end: interior deletes make a window
	// shorter than asked, so keep going until limit entries or the start.
	var out []DLQEntry
	for end := last; len(out) < limit && end >= first && end > 0; {
		want := uint64(limit - len(out))
		start := first
		if end-first+1 > want {
			start = end - want + 1
		}
		win, err := readRange(ctx, st, c.names, start, end)
		if err != nil {
			return nil, fmt.Errorf("read dead-letter stream %s: %w", name, err)
		}
		for i := len(win) - 1; i >= 0 && len(out) < limit; i-- {
			out = append(out, win[i])
		}
		end = start - 1
	}
	return out, nil
}

// readRange reads the messages of st with sequences in [start, end].
func readRange(ctx context.Context, st jetstream.Stream, names protocol.Names, start, end uint64) ([]DLQEntry, error) {
	// Filtered, so a client may create it with no more than the
	// permission to read the DLQ's subjects (one filter: the filtered
	// create API).
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: names.DLQSubjects(),
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var out []DLQEntry
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, err
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, err
		}
		if md.Sequence.Stream > end {
			return out, nil
		}
		out = append(out, dlqEntry(msg, md))
		if md.Sequence.Stream == end || md.NumPending == 0 {
			return out, nil
		}
	}
}

func dlqEntry(msg jetstream.Msg, md *jetstream.MsgMetadata) DLQEntry {
	h := msg.Headers()
	e := DLQEntry{
		Seq:     md.Sequence.Stream,
		Time:    md.Timestamp,
		Reason:  protocol.Reason(h.Get(protocol.HeaderReason)),
		Error:   h.Get(protocol.HeaderError),
		Subject: h.Get(protocol.HeaderOrigSubject),
		MsgID:   h.Get(protocol.HeaderOrigMsgID),
		Payload: msg.Data(),
		Digest:  h.Get(protocol.HeaderOrigDigest),
	}
	if n, err := strconv.ParseInt(h.Get(protocol.HeaderTruncated), 10, 64); err == nil && n > 0 {
		e.Truncated = n
	}
	if e.Reason == "" { // the reason is also the subject's last token
		s := msg.Subject()
		e.Reason = protocol.Reason(s[strings.LastIndexByte(s, '.')+1:])
	}
	return e
}
