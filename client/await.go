package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// ErrRejected is wrapped by AwaitRecord's error when a worker rejected the
// run's job to the dead-letter stream: errors.As it to a *RejectedError for
// the entry.
var ErrRejected = errors.New("client: job rejected")

// RejectedError says that a run has no record because its job was rejected.
type RejectedError struct {
	RunID string
	Entry DLQEntry
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("run %s: job rejected (%s): %s", e.RunID, e.Entry.Reason, e.Entry.Error)
}

func (e *RejectedError) Unwrap() error { return ErrRejected }

// AwaitOption configures AwaitRecord.
type AwaitOption func(*awaitOptions)

type awaitOptions struct {
	since   time.Time
	after   time.Duration
	waiting func()
}

// RejectedSince makes AwaitRecord count only rejections stored at or after
// t: a submitter passes the time it submitted (less any clock skew it
// allows), so that an older rejection of the same runId is not taken for
// this job's.
func RejectedSince(t time.Time) AwaitOption {
	return func(o *awaitOptions) { o.since = t }
}

// OnWaiting has AwaitRecord call fn once, on the caller's goroutine, when the
// run still has no record after d: the moment to tell a person that no
// worker has taken the job yet. A record soon after a submit is the normal
// case, and saying so for it would be noise. While no worker answers, the
// record cannot be read: fn waits for a worker's answer that there is none.
func OnWaiting(d time.Duration, fn func()) AwaitOption {
	return func(o *awaitOptions) { o.after, o.waiting = d, fn }
}

// awaitEvery is how often AwaitRecord looks again.
const awaitEvery = 250 * time.Millisecond

// rejectionGrace is how long a rejection waits for a record before it is
// told: a later job of the run (a retry of the dead-letter entry, or the
// job fixed and submitted again) gets one within milliseconds of a worker
// taking it, and then that run is the one to follow.
const rejectionGrace = 1500 * time.Millisecond

// Rejections finds the dead letters of run ids: it reads the dead-letter
// stream once, then only the entries stored since, and keeps the newest
// entry of each run id, without its payload. It is safe for concurrent use.
type Rejections struct {
	c     *Client
	mu    sync.Mutex
	next  uint64 // the stream is read from here on
	byRun map[string]DLQEntry
}

// Rejections returns a finder of the dead letters of run ids.
func (c *Client) Rejections() *Rejections {
	return &Rejections{c: c, next: 1, byRun: map[string]DLQEntry{}}
}

// Of returns the newest dead letter of runID stored at or after since (the
// zero time: any), without its Payload; ok is false when there is none. It
// reads through the workers' read relay: no worker answering is an error
// wrapping ErrNoWorker.
func (r *Rejections) Of(ctx context.Context, runID string, since time.Time) (e DLQEntry, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err = r.c.pages(ctx, r.c.names.ReadDLQSubject(), r.next, "", func(s stored) error {
		r.next = s.seq + 1
		if e := dlqEntry(s); e.RunID != "" {
			e.Payload = nil
			r.byRun[e.RunID] = e
		}
		return nil
	})
	if err != nil {
		return DLQEntry{}, false, fmt.Errorf("read dead-letter stream %s: %w", r.c.names.DLQStream(), err)
	}
	if e, ok = r.byRun[runID]; !ok || e.Time.Before(since) {
		return DLQEntry{}, false, nil
	}
	return e, true, nil
}

// AwaitRecord returns runID's record as soon as it has one. While it has
// none it also reads the dead-letter stream, each entry once, and returns
// a *RejectedError (wrapping ErrRejected) when that holds the run's job and
// no record follows within a second and a half (a retry's).
// It waits until ctx is done, through times when no worker answers (none
// runs, or all restart: ErrNoWorker); any other error reading is returned.
func (c *Client) AwaitRecord(ctx context.Context, runID string, opts ...AwaitOption) (kv.RunRecord, error) {
	var o awaitOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	rejections := c.Rejections()
	for {
		rec, err := c.Run(ctx, runID)
		absent := relayAbsent(err)
		if !errors.Is(err, ErrNotFound) && !absent {
			return rec, err
		}
		if !absent {
			e, found, err := rejections.Of(ctx, runID, o.since)
			if absent = relayAbsent(err); err != nil && !absent {
				return kv.RunRecord{}, err
			}
			if found {
				return c.rejectedUnlessRecord(ctx, runID, e)
			}
		}
		if o.waiting != nil && !absent && time.Since(start) >= o.after {
			o.waiting()
			o.waiting = nil
		}
		select {
		case <-ctx.Done():
			return kv.RunRecord{}, fmt.Errorf("run %s: no record: %w", runID, ctx.Err())
		case <-time.After(awaitEvery):
		}
	}
}

// rejectedUnlessRecord returns runID's record if it gets one within
// rejectionGrace, else the rejection e.
func (c *Client) rejectedUnlessRecord(ctx context.Context, runID string, e DLQEntry) (kv.RunRecord, error) {
	until := time.Now().Add(rejectionGrace)
	for {
		if rec, err := c.Run(ctx, runID); !errors.Is(err, ErrNotFound) && !relayAbsent(err) {
			return rec, err
		}
		if time.Now().After(until) {
			return kv.RunRecord{}, &RejectedError{RunID: runID, Entry: e}
		}
		select {
		case <-ctx.Done():
			return kv.RunRecord{}, fmt.Errorf("run %s: no record: %w", runID, ctx.Err())
		case <-time.After(awaitEvery):
		}
	}
}
