package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/kv"
)

var (
	// ErrHeld: another holder has a live lease on the run.
	ErrHeld = errors.New("lease: held by another worker")
	// ErrLost: the lease is no longer ours (taken over, expired, deleted) or
	// could not be renewed in time; its holder must stop publishing.
	ErrLost = errors.New("lease: lost")
	// ErrEnded: the lease was already released or deleted by its holder.
	ErrEnded = errors.New("lease: already released or deleted")
)

const (
	// acquireTries bounds the Create/read/CAS loop of Acquire; each turn
	// ends because somebody else's write won, so a few turns settle it.
	acquireTries = 5
	// retryPause is the pause between attempts of a write whose outcome
	// was not known (timeout, disconnection).
	retryPause = 50 * time.Millisecond
)

// Holder names who holds a lease.
type Holder struct {
	Worker, Node string
}

// Option configures a Lease.
type Option func(*options)

type options struct {
	log        zerolog.Logger
	renewEvery time.Duration
}

// WithLogger sets the logger for renewals and losses.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithRenewEvery overrides the renewal period (default TTL/3).
func WithRenewEvery(d time.Duration) Option { return func(o *options) { o.renewEvery = d } }

// Lease is a held lease on one run.
type Lease struct {
	store    *kv.Leases
	key      string
	holder   Holder
	ttl      time.Duration
	every    time.Duration
	margin   time.Duration
	log      zerolog.Logger
	epoch    uint64
	record   kv.LeaseRecord
	previous *kv.LeaseRecord

	mu      sync.Mutex
	rev     uint64    // revision of our last write known to have landed
	offset  int64     // progress the next write records
	lastSeq uint64    //
	lastOK  time.Time // when the write at rev was sent (its TTL runs from later)
	doubt   time.Time // when the first write of unknown outcome since lastOK was sent; zero if none
	started bool
	ended   bool
	err     error

	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the renewal loop has returned
}

// Acquire takes the lease of runID for h: it creates the key, or takes over
// a released lease with a compare-and-set at its revision. A live lease of
// somebody else gives ErrHeld, saying whose it is. ttl must be the bucket's
// TTL: renewals are timed from it.
//
// The epoch is the revision of the winning write. That write cannot contain
// its own revision, so the value's Epoch field is filled in by the first
// renewal (and by Release); until then it is 0 and the entry's revision is
// the epoch.
func Acquire(ctx context.Context, store *kv.Leases, runID string, h Holder, ttl time.Duration, opts ...Option) (*Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("lease: ttl must be positive, got %s", ttl)
	}
	o := options{log: zerolog.Nop(), renewEvery: ttl / 3}
	for _, opt := range opts {
		opt(&o)
	}
	var lastErr error
	for range acquireTries {
		rec := kv.LeaseRecord{Worker: h.Worker, Node: h.Node, State: kv.LeaseHeld}
		sent := time.Now()
		rev, err := store.Create(ctx, runID, rec)
		if err == nil {
			return newLease(store, runID, h, ttl, o, rev, rec, nil, sent), nil
		}
		if !errors.Is(err, kv.ErrExists) {
			return nil, fmt.Errorf("lease: acquire %s: %w", runID, err)
		}
		cur, curRev, err := store.Get(ctx, runID)
		if errors.Is(err, kv.ErrNotFound) { // expired or deleted since: create again
			lastErr = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lease: acquire %s: read current lease: %w", runID, err)
		}
		if cur.State != kv.LeaseReleased {
			return nil, fmt.Errorf("%w: run %s by worker %q on node %q (revision %d)", ErrHeld, runID, cur.Worker, cur.Node, curRev)
		}
		rec.Offset, rec.LastSeq = cur.Offset, cur.LastSeq
		sent = time.Now()
		rev, err = store.Update(ctx, runID, rec, curRev)
		if err == nil {
			prev := cur
			return newLease(store, runID, h, ttl, o, rev, rec, &prev, sent), nil
		}
		if !errors.Is(err, kv.ErrConflict) {
			return nil, fmt.Errorf("lease: acquire %s: take over released lease: %w", runID, err)
		}
		lastErr = err // somebody else took it, or our read was stale: look again
	}
	return nil, fmt.Errorf("%w: run %s: contended, %d attempts lost: %w", ErrHeld, runID, acquireTries, lastErr)
}

func newLease(store *kv.Leases, key string, h Holder, ttl time.Duration, o options, rev uint64, rec kv.LeaseRecord, prev *kv.LeaseRecord, sent time.Time) *Lease {
	rec.Epoch = rev
	return &Lease{
		store: store, key: key, holder: h, ttl: ttl, every: o.renewEvery, margin: ttl / 6,
		log:   o.log.With().Str("run_id", key).Uint64("epoch", rev).Logger(),
		epoch: rev, record: rec, previous: prev,
		rev: rev, offset: rec.Offset, lastSeq: rec.LastSeq, lastOK: sent,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Epoch is the lease's fencing token: the revision of the write that took it.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Revision is the revision of the lease's latest write known to have landed.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Record is the lease as taken: held by us, with Epoch set, and with the
// offset and last sequence inherited from a released lease (zero for a new
// one), which is where the successor resumes.
func (l *Lease) Record() kv.LeaseRecord { return l.record }

// Previous is the released lease this one took over, or nil when the lease
// was created.
func (l *Lease) Previous() *kv.LeaseRecord { return l.previous }

// Progress sets the journal offset and chain sequence the next renewal
// records.
func (l *Lease) Progress(offset int64, lastSeq uint64) {
	l.mu.Lock()
	l.offset, l.lastSeq = offset, lastSeq
	l.mu.Unlock()
}

// Lost closes when the lease is lost: a renewal's compare-and-set failed
// because somebody else wrote the key, or no renewal succeeded within
// TTL - TTL/6 of the last one, or Release or Delete found the lease no
// longer ours. It does not close on Stop, on a successful Release or
// Delete, nor when the context given to Start ends.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err says why the lease was lost (wrapping ErrLost), or nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Start renews the lease in the background every TTL/3 until Stop, Release
// or Delete, the loss of the lease, or the end of ctx (after which the lease
// simply expires). Calling it again does nothing.
func (l *Lease) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.ended || l.err != nil {
		return
	}
	select {
	case <-l.stop:
		return
	default:
	}
	l.started = true
	go l.renewLoop(ctx)
}

// Stop ends renewal without touching the KV: the lease expires after its
// TTL unless released or deleted. The holder must act as if it had lost it.
func (l *Lease) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if started {
		<-l.done
	}
}

// Release hands the lease off: it stops renewal and writes, by
// compare-and-set, {State: released, Offset: offset, LastSeq: lastSeq} for
// the successor to resume from. A failed compare-and-set means the lease
// was no longer ours and gives ErrLost.
func (l *Lease) Release(ctx context.Context, offset int64, lastSeq uint64) error {
	l.Stop()
	rec := l.value(kv.LeaseReleased)
	rec.Offset, rec.LastSeq = offset, lastSeq
	return l.finalWrite(ctx, "release", func(rev uint64) (uint64, error) {
		return l.store.Update(ctx, l.key, rec, rev)
	}, func(cur kv.LeaseRecord, err error) bool {
		// Our own earlier attempt landed.
		return err == nil && cur == rec
	})
}

// Delete ends the lease of a finished run: it stops renewal and deletes the
// key on condition that its revision is still ours; ErrLost otherwise.
func (l *Lease) Delete(ctx context.Context) error {
	l.Stop()
	return l.finalWrite(ctx, "delete", func(rev uint64) (uint64, error) {
		return rev, l.store.Delete(ctx, l.key, rev)
	}, func(_ kv.LeaseRecord, err error) bool {
		// Our own earlier attempt landed (or the lease expired since,
		// which ends it just as well).
		return errors.Is(err, kv.ErrNotFound)
	})
}

// finalWrite runs a Release or Delete write: retried while its outcome is
// unknown, and, on a compare-and-set conflict after such an attempt, judged
// by reading the key back: landed(cur, err) says our own attempt is there,
// and a renewal of ours that landed unbeknownst to us is adopted.
func (l *Lease) finalWrite(ctx context.Context, op string, write func(rev uint64) (uint64, error), landed func(kv.LeaseRecord, error) bool) error {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return ErrEnded
	}
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	for {
		l.mu.Lock()
		rev := l.rev
		l.mu.Unlock()
		sent := time.Now()
		newRev, err := write(rev)
		switch {
		case err == nil:
			l.mu.Lock()
			l.rev, l.ended = newRev, true
			l.mu.Unlock()
			l.log.Debug().Str("op", op).Msg("lease ended")
			return nil
		case errors.Is(err, kv.ErrConflict):
			l.mu.Lock()
			inDoubt := !l.doubt.IsZero()
			l.mu.Unlock()
			if inDoubt {
				cur, curRev, gerr := l.store.Get(ctx, l.key)
				if landed(cur, gerr) {
					l.mu.Lock()
					l.rev, l.ended, l.doubt = curRev, true, time.Time{}
					l.mu.Unlock()
					return nil
				}
				if gerr == nil && l.ours(cur) && curRev > rev {
					l.adopt(curRev)
					continue
				}
			}
			return l.lose(fmt.Errorf("%w: %s of run %s at revision %d: %w", ErrLost, op, l.key, rev, err))
		default:
			l.markDoubt(sent)
			l.log.Warn().Err(err).Str("op", op).Msg("lease write failed; retrying")
			select {
			case <-ctx.Done():
				return fmt.Errorf("lease: %s of run %s: %w (last error: %w)", op, l.key, ctx.Err(), err)
			case <-time.After(retryPause):
			}
		}
	}
}

// value is the record our writes carry.
func (l *Lease) value(state kv.LeaseState) kv.LeaseRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return kv.LeaseRecord{Worker: l.holder.Worker, Node: l.holder.Node, Epoch: l.epoch, State: state, Offset: l.offset, LastSeq: l.lastSeq}
}

// ours reports whether cur was written by this lease (only we write our
// epoch) and still holds it.
func (l *Lease) ours(cur kv.LeaseRecord) bool {
	return cur.Epoch == l.epoch && cur.State == kv.LeaseHeld && cur.Worker == l.holder.Worker
}

func (l *Lease) markDoubt(sent time.Time) {
	l.mu.Lock()
	if l.doubt.IsZero() {
		l.doubt = sent
	}
	l.mu.Unlock()
}

// adopt takes rev, found holding our value, as our latest write: one of
// the writes of unknown outcome landed. Its TTL is counted from the first
// of them, the earliest it can have been sent.
func (l *Lease) adopt(rev uint64) {
	l.mu.Lock()
	l.rev, l.lastOK, l.doubt = rev, l.doubt, time.Time{}
	l.mu.Unlock()
	l.log.Debug().Uint64("revision", rev).Msg("lease write of unknown outcome had landed")
}

func (l *Lease) lose(err error) error {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	err = l.err
	l.mu.Unlock()
	l.lostOnce.Do(func() {
		l.log.Warn().Err(err).Msg("lease lost")
		close(l.lost)
	})
	return err
}

func (l *Lease) renewLoop(parent context.Context) {
	defer close(l.done)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go func() { // Stop interrupts a renewal in flight
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	retry := max(l.every/4, 10*time.Millisecond)
	tick := time.NewTimer(l.every)
	defer tick.Stop()
	for {
		l.mu.Lock()
		deadline := l.lastOK.Add(l.ttl - l.margin)
		l.mu.Unlock()
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
			l.lose(fmt.Errorf("%w: run %s: no successful renewal within %s", ErrLost, l.key, l.ttl-l.margin))
			return
		case <-tick.C:
			wait.Stop()
			switch l.renew(ctx, deadline) {
			case renewed:
				tick.Reset(l.every)
			case retrySoon:
				tick.Reset(retry)
			case lost:
				return
			}
		}
	}
}

type renewOutcome int

const (
	renewed renewOutcome = iota
	retrySoon
	lost
)

// renew writes the lease once at our revision.
func (l *Lease) renew(ctx context.Context, deadline time.Time) renewOutcome {
	rec := l.value(kv.LeaseHeld)
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	// Waiting past the deadline is pointless: the lease counts as lost then.
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	newRev, err := l.store.Update(actx, l.key, rec, rev)
	switch {
	case err == nil:
		l.mu.Lock()
		l.rev, l.lastOK, l.doubt = newRev, sent, time.Time{}
		l.mu.Unlock()
		return renewed
	case errors.Is(err, kv.ErrConflict):
		l.mu.Lock()
		inDoubt := !l.doubt.IsZero()
		l.mu.Unlock()
		if !inDoubt {
			l.lose(fmt.Errorf("%w: run %s: revision %d is no longer current (taken over, expired or deleted): %w", ErrLost, l.key, rev, err))
			return lost
		}
		// An earlier renewal of unknown outcome may be the write that
		// moved the revision: read the key to tell.
		cur, curRev, gerr := l.store.Get(actx, l.key)
		switch {
		case gerr == nil && l.ours(cur) && curRev > rev:
			l.adopt(curRev)
			return retrySoon
		case gerr == nil && !(l.ours(cur) || cur.Epoch == 0 && curRev == l.epoch),
			errors.Is(gerr, kv.ErrNotFound):
			l.lose(fmt.Errorf("%w: run %s: revision %d is no longer current: %w", ErrLost, l.key, rev, err))
			return lost
		}
		// A stale read or a transient error: try again; the deadline
		// decides if it never clears.
		return retrySoon
	default:
		// Timed out, disconnected or interrupted by Stop: the write may
		// still land, so its outcome is in doubt.
		l.markDoubt(sent)
		if ctx.Err() == nil {
			l.log.Warn().Err(err).Msg("lease renewal failed; retrying")
		}
		return retrySoon
	}
}
