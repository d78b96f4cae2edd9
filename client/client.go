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
	// ErrNoWorker means no worker answered a request in time (a cancel, an
	// input, a read through the relay): none is running, or all restart.
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
}

// Option configures a Client. An option given a value it cannot take
// makes New fail with an error wrapping ErrInvalidOption.
type Option func(*Client) error

// ErrInvalidOption: an option was given a value it cannot take.
var ErrInvalidOption = errors.New("client: invalid option")

// WithMaxLineBytes bounds the size of a line Watch reassembles from chunks
// (default DefaultMaxLineBytes); a longer one is an ErrBrokenChunk.
func WithMaxLineBytes(n int) Option {
	return func(c *Client) error {
		if n <= 0 {
			return fmt.Errorf("%w: max line bytes %d must be positive", ErrInvalidOption, n)
		}
		c.maxLine = n
		return nil
	}
}

// New returns a client of the deployment named by names, or an error
// wrapping ErrInvalidOption.
func New(js jetstream.JetStream, names protocol.Names, opts ...Option) (*Client, error) {
	c := &Client{js: js, names: names, maxLine: DefaultMaxLineBytes}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Names returns the names the client was created with.
func (c *Client) Names() protocol.Names { return c.names }

// Submit publishes job on the run-job subject (a session's job: on its
// session's, see WithSession) with Nats-Msg-Id set to its runId and waits
// for the stream's ack. A job that would be rejected for
// its own content (see protocol.Job.Validate) is not sent: the error wraps
// the protocol's rejection sentinel. If the stream already held a job
// with that runId, it returns an error wrapping ErrDuplicate: the run was
// submitted before, and no second run will start.
func (c *Client) Submit(ctx context.Context, job protocol.Job, opts ...SubmitOption) error {
	for _, o := range opts {
		o(&job)
	}
	return c.submit(ctx, job, job.RunID)
}

// submit is Submit with msgID as the job's Nats-Msg-Id.
func (c *Client) submit(ctx context.Context, job protocol.Job, msgID string) error {
	body, err := protocol.EncodeJob(job) // validates, so a bad job never leaves
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	subject := c.names.RunJobSubject()
	switch {
	case job.Session != "":
		subject = c.names.SessionJobSubject(job.Session)
	case job.ConcurrencyKey != "":
		// Straight into its key's lane: a worker would move it there.
		subject = c.names.KeyJobSubject(job.ConcurrencyKey, job.EffectivePriority())
	}
	ack, err := c.js.Publish(ctx, subject, body,
		jetstream.WithMsgID(msgID),
		jetstream.WithExpectStream(c.names.JobsStream()))
	if err != nil {
		return fmt.Errorf("submit %s: %w", job.RunID, hintNoStream(err, c.names.JobsStream()))
	}
	if ack.Duplicate {
		return fmt.Errorf("%w: run %s (stream %s seq %d)", ErrDuplicate, job.RunID, ack.Stream, ack.Sequence)
	}
	return nil
}

// Run returns the record of runID, or an error wrapping ErrNotFound. It
// reads through the workers' read relay.
func (c *Client) Run(ctx context.Context, runID string) (kv.RunRecord, error) {
	if !protocol.ValidRunID(runID) {
		return kv.RunRecord{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	return getRecord[kv.RunRecord](ctx, c, c.names.ReadRunSubject(runID), runID, "run "+runID, runID)
}

// getRecord reads the record key through the read relay's subject: what
// names it in errors, notFound in one wrapping ErrNotFound.
func getRecord[T any](ctx context.Context, c *Client, subject, key, what, notFound string) (T, error) {
	var zero T
	m, ok, err := c.get(ctx, subject, "")
	switch {
	case err != nil:
		return zero, fmt.Errorf("%s: %w", what, err)
	case !ok || isDeleted(m.header):
		return zero, fmt.Errorf("%w: %s", ErrNotFound, notFound)
	}
	rec, err := kv.Decode[T](key, m.seq, m.data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return rec, nil
}

// Runs returns every run record, newest first (by CreatedAt, then runId).
// Records that cannot be decoded are left out and reported in an error
// wrapping kv.ErrDecode, which comes with the other records. It pages the
// records bucket through the workers' read relay.
func (c *Client) Runs(ctx context.Context) ([]kv.RunRecord, error) {
	prefix := "$KV." + c.names.RunsBucket() + "."
	latest := map[string]stored{} // a key written again while listed comes twice
	err := c.pages(ctx, c.names.ReadRunsSubject(), 1, "", func(s stored) error {
		key := strings.TrimPrefix(s.subject, prefix)
		if s.seq > latest[key].seq {
			latest[key] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]kv.RunRecord, 0, len(latest))
	var bad []error
	for key, s := range latest {
		if isDeleted(s.header) {
			continue
		}
		rec, err := kv.Decode[kv.RunRecord](key, s.seq, s.data)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b kv.RunRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.RunID, b.RunID)
	})
	if err := errors.Join(bad...); err != nil {
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
	msg, err := c.request(ctx, nats.NewMsg(c.names.CancelSubject(runID)), "cancel "+runID)
	if err != nil {
		return protocol.CancelReply{}, err
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
	Seq         uint64          // sequence in the DLQ stream
	RunID       string          // the job's runId, "" when it has none that is valid
	Time        time.Time       // when it was rejected
	Reason      protocol.Reason // machine-readable reason code
	Error       string          // explanation for a person
	Subject     string          // subject the job was published on
	MsgID       string          // its Nats-Msg-Id, if it had one
	ContentType string          // its Content-Type header ("" for JSON)
	Payload     []byte          // the job as received, or its first bytes when Truncated
	// Truncated is the job's size when it did not fit the server's max
	// payload beside the DLQ's headers, and Payload holds its first bytes
	// only; Digest is then the whole job's "sha256:<hex>". 0: whole.
	Truncated int64
	Digest    string
}

// DLQ returns the newest limit entries of the dead-letter stream, newest
// first; limit <= 0 returns them all. It reads through the workers' read
// relay: it finds where the newest limit begin (probing pages of one entry,
// whose EOB counts the entries after it), then pages from there.
func (c *Client) DLQ(ctx context.Context, limit int) ([]DLQEntry, error) {
	from, err := c.dlqTail(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("read dead-letter stream %s: %w", c.names.DLQStream(), err)
	}
	var out []DLQEntry
	err = c.pages(ctx, c.names.ReadDLQSubject(), from, "", func(s stored) error {
		out = append(out, dlqEntry(s))
		if limit > 0 && len(out) > limit {
			out = out[1:] // entries stored while reading: keep the newest
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read dead-letter stream %s: %w", c.names.DLQStream(), err)
	}
	slices.Reverse(out)
	return out, nil
}

// dlqTail is a sequence from which the DLQ holds at most limit entries,
// all of them when it holds fewer (1 when limit <= 0).
func (c *Client) dlqTail(ctx context.Context, limit int) (uint64, error) {
	// count is how many entries have a sequence >= from, and the first's.
	count := func(from uint64) (n, first uint64, err error) {
		pending, err := c.page(ctx, c.names.ReadDLQSubject(), protocol.ReadRequest{From: from, Max: 1}, false, func(s stored) error {
			first = s.seq
			return nil
		})
		if err != nil || first == 0 {
			return 0, 0, err
		}
		return 1 + pending, first, nil
	}
	if limit <= 0 {
		return 1, nil
	}
	n, lo, err := count(1)
	if err != nil || n <= uint64(limit) {
		return 1, err
	}
	// Invariant: count(lo) > limit; find hi with count(hi) <= limit, then
	// the smallest such sequence.
	hi := lo + uint64(limit)
	for {
		if n, _, err = count(hi); err != nil {
			return 0, err
		}
		if n <= uint64(limit) {
			break
		}
		lo, hi = hi, hi+2*(hi-lo)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if n, _, err = count(mid); err != nil {
			return 0, err
		}
		if n <= uint64(limit) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

func dlqEntry(s stored) DLQEntry {
	h := s.header
	e := DLQEntry{
		Seq:     s.seq,
		Time:    s.time,
		Reason:  protocol.Reason(h.Get(protocol.HeaderReason)),
		Error:   h.Get(protocol.HeaderError),
		Subject: h.Get(protocol.HeaderOrigSubject),
		MsgID:   h.Get(protocol.HeaderOrigMsgID),
		Payload: s.data,
		Digest:  h.Get(protocol.HeaderOrigDigest),
		// Set from the job's own header by the rejection (consumer.dlqMsg).
		ContentType: h.Get(protocol.HeaderContentType),
		RunID:       h.Get(protocol.HeaderRunID),
	}
	if e.RunID == "" { // an entry of a worker from before the header
		e.RunID = protocol.PeekRunID(s.data, e.ContentType)
	}
	if n, err := strconv.ParseInt(h.Get(protocol.HeaderTruncated), 10, 64); err == nil && n > 0 {
		e.Truncated = n
	}
	if e.Reason == "" { // the reason is also the subject's last token
		e.Reason = protocol.Reason(s.subject[strings.LastIndexByte(s.subject, '.')+1:])
	}
	return e
}
