package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

var (
	// ErrNoEntry means the dead-letter stream holds no entry of that
	// sequence (never, or no longer: deleted or aged out).
	ErrNoEntry = errors.New("client: no such dead letter")
	// ErrNotRetriable means a dead letter's job cannot be submitted again as
	// it is: only its start was kept, it is rejected for its own content, or
	// its run id already names a run.
	ErrNotRetriable = errors.New("client: dead letter cannot be retried")
)

// DLQEntryAt returns the dead letter of sequence seq, or an error wrapping
// ErrNoEntry. It reads through the workers' read relay.
func (c *Client) DLQEntryAt(ctx context.Context, seq uint64) (DLQEntry, error) {
	var e DLQEntry
	var found bool
	_, err := c.page(ctx, c.names.ReadDLQSubject(), protocol.ReadRequest{From: seq, Max: 1}, false, func(s stored) error {
		// The page starts at the first entry from seq on.
		if found = s.seq == seq; found {
			e = dlqEntry(s)
		}
		return nil
	})
	switch {
	case err != nil:
		return DLQEntry{}, fmt.Errorf("read dead letter %d: %w", seq, err)
	case !found:
		return DLQEntry{}, fmt.Errorf("%w: %d in %s", ErrNoEntry, seq, c.names.DLQStream())
	}
	return e, nil
}

// RetryDLQ submits the job of dead letter seq again: the same job, under
// its own run id, or under runID when that is not empty. A rejected job
// never started, so its id names no run and `watch` of it follows the
// retry. An id that does name a run (the job was a duplicate, or a run
// was started under it since), or that a run's chain still holds after
// its record expired, would only be rejected again or ignored: that is an
// error wrapping ErrNotRetriable, as is an entry that holds only the
// start of its job or a job rejected for its own content (a worker's
// profiles cannot change that). The entry stays in the DLQ (DeleteDLQ
// removes it). Its Nats-Msg-Id is "<runId>:dlq:<seq>", so retrying the
// entry twice within the jobs stream's duplicates window submits it once
// (the second is an ErrDuplicate) while the first submission of the id
// does not hide the retry.
func (c *Client) RetryDLQ(ctx context.Context, seq uint64, runID string) (protocol.Job, error) {
	e, err := c.DLQEntryAt(ctx, seq)
	if err != nil {
		return protocol.Job{}, err
	}
	if e.Truncated > 0 {
		return protocol.Job{}, fmt.Errorf("%w: dead letter %d holds only the first %d of its job's %d bytes", ErrNotRetriable, seq, len(e.Payload), e.Truncated)
	}
	job, err := protocol.DecodeJob(e.Payload, e.ContentType, protocol.Limits{})
	if err != nil {
		return protocol.Job{}, fmt.Errorf("%w: dead letter %d: its job is refused for its own content, not a worker's configuration: %w",
			ErrNotRetriable, seq, err)
	}
	if runID != "" {
		job.RunID = runID
	}
	if !protocol.ValidRunID(job.RunID) {
		return protocol.Job{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, job.RunID)
	}
	switch rec, err := c.Run(ctx, job.RunID); {
	case err == nil:
		return protocol.Job{}, fmt.Errorf("%w: run %s exists (state %s), so its job would be rejected again as a duplicate; give the retry a new run id",
			ErrNotRetriable, job.RunID, rec.State)
	case !errors.Is(err, ErrNotFound):
		return protocol.Job{}, err
	}
	ran, err := c.ChainStored(ctx, job.RunID)
	if err != nil {
		return protocol.Job{}, err
	}
	if ran {
		return protocol.Job{}, fmt.Errorf("%w: run %s ran before (its record expired, its events are still stored), so a worker would not start it again; give the retry a new run id",
			ErrNotRetriable, job.RunID)
	}
	if err := c.submit(ctx, job, fmt.Sprintf("%s:dlq:%d", job.RunID, seq)); err != nil {
		return protocol.Job{}, err
	}
	return job, nil
}

// DeleteDLQ removes dead letter seq from the DLQ stream; an error wraps
// ErrNoEntry if there is none. Unlike the reads, it goes through the
// JetStream API, not the read relay: it administers the stream, which
// needs an administrator's user. The users of deploy/nats-auth.conf may
// not (the client's request goes unanswered, which the error says).
func (c *Client) DeleteDLQ(ctx context.Context, seq uint64) error {
	s, err := c.js.Stream(ctx, c.names.DLQStream())
	if err == nil {
		// Got first, so that a missing entry is said as such (a refused
		// delete does not tell it from other refusals).
		if _, err = s.GetMsg(ctx, seq); errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: %d in %s", ErrNoEntry, seq, c.names.DLQStream())
		}
	}
	if err == nil {
		err = s.DeleteMsg(ctx, seq)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("delete dead letter %d: no answer from the JetStream API (%w): removing an entry needs a NATS user that may administer stream %s",
			seq, err, c.names.DLQStream())
	case err != nil:
		return fmt.Errorf("delete dead letter %d: %w", seq, hintNoStream(err, c.names.DLQStream()))
	}
	return nil
}
