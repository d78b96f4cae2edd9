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
	// ErrLost: the lease is no longer ours (taken over, deleted), or its
	// worker's liveness lapsed; its holder must stop publishing.
	ErrLost = errors.New("lease: lost")
	// ErrEnded: the lease was already released or deleted by its holder.
	ErrEnded = errors.New("lease: already released or deleted")
	// ErrNotLive: the worker has no live session to take a lease in (its
	// liveness lapsed and its key has not expired yet, or it was closed).
	ErrNotLive = errors.New("lease: the worker's liveness is not renewed")
)

const (
	// acquireTries bounds the Create/read/CAS loop of Acquire; each turn
	// ends because somebody else's write won, so a few turns settle it.
	acquireTries = 5
	// retryPause is the pause between attempts of a write whose outcome
	// was not known (timeout, disconnection).
	retryPause = 50 * time.Millisecond
	// markerTTL is how long the purge marker of an ended lease or a closed
	// liveness key stays: watchers see it at once, and the bucket, which
	// has no MaxAge, keeps no marker per run ever.
	markerTTL = time.Minute
)

// Holder names who holds a lease.
type Holder struct {
	Worker, Node string
}

// Acquire takes the lease of runID in the current session: it creates the
// key, or takes over by compare-and-set at its revision a lease that was
// released, or whose holder's session is gone. A lease with a live holder
// gives ErrHeld, saying whose it is.
//
// The epoch is the revision of the winning write. That write cannot contain
// its own revision, so the value's Epoch field is 0 while the lease is held
// (the entry's revision is the epoch) and filled in by Release.
func (lv *Liveness) Acquire(ctx context.Context, runID string) (*Lease, error) {
	s, err := lv.current()
	if err != nil {
		return nil, err
	}
	if !lv.beginAcquire(s, runID) {
		return nil, fmt.Errorf("%w: run %s is being taken by this worker already", ErrHeld, runID)
	}
	defer lv.endAcquire(s, runID)
	var lastErr error
	for range acquireTries {
		rec := kv.LeaseRecord{Worker: lv.holder.Worker, Node: lv.holder.Node, State: kv.LeaseHeld, Session: s.id}
		rev, err := lv.leases.Create(ctx, runID, rec)
		if err == nil {
			return lv.register(s, runID, rev, rec, nil)
		}
		if !errors.Is(err, kv.ErrExists) {
			return nil, fmt.Errorf("lease: acquire %s: %w", runID, err)
		}
		// From the leader: a lagging replica's older revision would show
		// a lease released a moment ago as still held (a hand-off's
		// successor refused, its attach job dropped until the next scan).
		cur, curRev, err := lv.leases.GetFromLeader(ctx, lv.js, runID)
		if errors.Is(err, kv.ErrNotFound) { // deleted since: create again
			lastErr = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lease: acquire %s: read current lease: %w", runID, err)
		}
		held, err := lv.heldLive(ctx, runID, cur, curRev, s)
		if err != nil {
			return nil, fmt.Errorf("lease: acquire %s: is its holder live: %w", runID, err)
		}
		if held {
			return nil, fmt.Errorf("%w: run %s by worker %q on node %q (revision %d)", ErrHeld, runID, cur.Worker, cur.Node, curRev)
		}
		if cur.State == kv.LeaseReleased {
			rec.Offset, rec.LastSeq = cur.Offset, cur.LastSeq
		}
		rev, err = lv.leases.Update(ctx, runID, rec, curRev)
		if err == nil {
			prev := cur
			return lv.register(s, runID, rev, rec, &prev)
		}
		if !errors.Is(err, kv.ErrConflict) {
			return nil, fmt.Errorf("lease: acquire %s: take over: %w", runID, err)
		}
		lastErr = err // somebody else took it, or our read was stale: look again
	}
	return nil, fmt.Errorf("%w: run %s: contended, %d attempts lost: %w", ErrHeld, runID, acquireTries, lastErr)
}

// beginAcquire marks runID as being acquired in session s, or reports
// false when it is already (or held).
func (lv *Liveness) beginAcquire(s *session, runID string) bool {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if s.acquiring[runID] || s.leases[runID] != nil {
		return false
	}
	s.acquiring[runID] = true
	return true
}

func (lv *Liveness) endAcquire(s *session, runID string) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	delete(s.acquiring, runID)
}

// HeldLive reports whether cur, the lease of runID at revision rev, is held
// by a live holder: not released, and its holder's session still renewed.
// A lease of this worker's current session counts only while this process
// holds it (one whose Acquire's outcome it never learned does not).
func (lv *Liveness) HeldLive(ctx context.Context, runID string, cur kv.LeaseRecord, rev uint64) (bool, error) {
	lv.mu.Lock()
	s := lv.sess
	taking := s != nil && s.acquiring[runID]
	lv.mu.Unlock()
	if taking && cur.State == kv.LeaseHeld && cur.Worker == lv.holder.Worker && cur.Session == s.id {
		return true, nil // being taken here: its Acquire has not returned yet
	}
	return lv.heldLive(ctx, runID, cur, rev, s)
}

func (lv *Liveness) heldLive(ctx context.Context, runID string, cur kv.LeaseRecord, rev uint64, s *session) (bool, error) {
	if cur.State != kv.LeaseHeld {
		return false, nil
	}
	if s != nil && cur.Worker == lv.holder.Worker && cur.Session == s.id {
		lv.mu.Lock()
		defer lv.mu.Unlock()
		// Inside Acquire, its own mark is set: a write of ours that
		// never registered is taken over as any dead session's.
		return s.leases[runID] != nil, nil
	}
	if cur.Session == 0 {
		// Written by a worker from before liveness keys, which renews the
		// lease itself every TTL/3 (a rolling deploy): live while its last
		// write is younger than the TTL, as the bucket TTL judged it.
		e, err := lv.leases.EntryFromLeader(ctx, lv.js, runID)
		if errors.Is(err, kv.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return e.Revision != rev || lv.clock.Now().Sub(e.Created) < lv.ttl, nil
	}
	if !validName.MatchString(cur.Node) || !validName.MatchString(cur.Worker) {
		return false, nil // no liveness key can name it
	}
	// From the leader: a lagging replica that has not seen the key's
	// creation would make a live holder look gone.
	live, _, err := lv.live.GetFromLeader(ctx, lv.js, LiveKey(cur.Node, cur.Worker))
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return live.Session == cur.Session, nil
}

func (lv *Liveness) register(s *session, key string, rev uint64, rec kv.LeaseRecord, prev *kv.LeaseRecord) (*Lease, error) {
	if lv.beforeRegister != nil {
		lv.beforeRegister(key)
	}
	rec.Epoch = rev
	l := &Lease{
		lv: lv, sess: s, key: key, holder: lv.holder, ttl: lv.ttl,
		log:   lv.log.With().Str("run_id", key).Uint64("epoch", rev).Logger(),
		epoch: rev, record: rec, previous: prev, rev: rev,
		lost: make(chan struct{}),
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if s.err != nil {
		// Lost meanwhile: the key names a dead session, which any worker
		// of the node may take over.
		return nil, fmt.Errorf("lease: acquire %s: %w", key, s.err)
	}
	s.leases[key] = l
	return l, nil
}

// Observe tells lv that runID's lease key was written at revision rev (a
// value, a delete or a purge), as a watch of the bucket sees it. A lease
// held here whose key another writer changed is lost at once: held leases
// are not renewed, so an idle holder would otherwise learn it only at its
// next publish (fenced on the chain). Such writes come from an operator, or
// from a worker of the older design whose bucket TTL expired the lease
// (docs/operations.md); a successor's takeover needs this worker's
// liveness gone, which it knows first.
func (lv *Liveness) Observe(runID string, rev uint64) {
	lv.mu.Lock()
	var l *Lease
	if lv.sess != nil {
		l = lv.sess.leases[runID]
	}
	lv.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	// Our own writes: the one that took the lease, or a final one in
	// flight, whose event may come before its reply.
	ours := rev <= l.rev || l.writing
	l.mu.Unlock()
	if !ours {
		l.lose(fmt.Errorf("%w: run %s: its key was written at revision %d by another writer", ErrLost, runID, rev))
	}
}

func (lv *Liveness) unregister(l *Lease) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if l.sess.leases[l.key] == l {
		delete(l.sess.leases, l.key)
	}
}

// Lease is a held lease on one run.
type Lease struct {
	lv       *Liveness
	sess     *session
	key      string
	holder   Holder
	ttl      time.Duration
	log      zerolog.Logger
	epoch    uint64
	record   kv.LeaseRecord
	previous *kv.LeaseRecord

	mu      sync.Mutex
	rev     uint64 // revision of our last write known to have landed
	doubt   bool   // a final write of unknown outcome was sent
	writing bool   // a final write is under way
	stopped bool   // Stop was called
	ended   bool   // released or deleted
	err     error  // why it was lost
	lost    chan struct{}
	once    sync.Once // closes lost
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
// offset and last sequence inherited from a released lease (zero
// otherwise), which is where the successor resumes.
func (l *Lease) Record() kv.LeaseRecord { return l.record }

// Previous is the lease this one took over (released, or held by a worker
// whose liveness is gone), or nil when the lease was created.
func (l *Lease) Previous() *kv.LeaseRecord { return l.previous }

// Lost closes when the lease is lost: its worker's liveness lapsed (no
// renewal within TTL - TTL/6 of the last one, or the key removed) or was
// closed, or Release or Delete found the lease no longer ours. It does not
// close on Stop, nor on a successful Release or Delete.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err says why the lease was lost (wrapping ErrLost or ErrNotLive), or nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stop gives the lease up without a hand-off: the holder must act as if it
// had lost it. One TTL later (the time an unrenewed lease used to take to
// expire, so a run that keeps failing is not retried in a loop) the lease
// is released with no position, for the node's recovery to take over (a
// successor aligns from the chain); sooner if the worker's liveness ends.
func (l *Lease) Stop() {
	l.mu.Lock()
	if l.stopped || l.ended || l.err != nil {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	l.mu.Unlock()
	go func() {
		t := l.lv.clock.NewTimer(l.ttl)
		defer t.Stop()
		select {
		case <-t.C():
		case <-l.lost:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl)
		defer cancel()
		if err := l.Release(ctx, 0, 0); err != nil && !errors.Is(err, ErrEnded) {
			l.log.Warn().Err(err).Msg("release a stopped lease")
		}
	}()
}

// Release hands the lease off: it writes, by compare-and-set, {State:
// released, Offset: offset, LastSeq: lastSeq} for the successor to resume
// from. A failed compare-and-set means the lease was no longer ours and
// gives ErrLost.
func (l *Lease) Release(ctx context.Context, offset int64, lastSeq uint64) error {
	rec := kv.LeaseRecord{Worker: l.holder.Worker, Node: l.holder.Node, Epoch: l.epoch, State: kv.LeaseReleased, Offset: offset, LastSeq: lastSeq}
	return l.finalWrite(ctx, "release", func(rev uint64) error {
		_, err := l.lv.leases.Update(ctx, l.key, rec, rev)
		return err
	}, func(cur kv.LeaseRecord, err error) bool {
		// Our own earlier attempt landed.
		return err == nil && cur == rec
	})
}

// Delete ends the lease of a finished run: it purges the key (leaving a
// short-lived marker) on condition that its revision is still ours;
// ErrLost otherwise.
func (l *Lease) Delete(ctx context.Context) error {
	return l.finalWrite(ctx, "delete", func(rev uint64) error {
		return l.lv.leases.Purge(ctx, l.key, rev, markerTTL)
	}, func(_ kv.LeaseRecord, err error) bool {
		// Our own earlier attempt landed.
		return errors.Is(err, kv.ErrNotFound)
	})
}

// finalWrite runs a Release or Delete write: retried while its outcome is
// unknown, and, on a compare-and-set conflict after such an attempt, judged
// by reading the key back: landed(cur, err) says our own attempt is there.
func (l *Lease) finalWrite(ctx context.Context, op string, write func(rev uint64) error, landed func(kv.LeaseRecord, error) bool) error {
	l.mu.Lock()
	switch {
	case l.ended:
		l.mu.Unlock()
		return ErrEnded
	case l.err != nil:
		err := l.err
		l.mu.Unlock()
		return err
	}
	rev := l.rev
	l.writing = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.writing = false
		l.mu.Unlock()
	}()
	for {
		err := write(rev)
		switch {
		case err == nil:
			l.end()
			l.log.Debug().Str("op", op).Msg("lease ended")
			return nil
		case errors.Is(err, kv.ErrConflict):
			l.mu.Lock()
			inDoubt := l.doubt
			l.mu.Unlock()
			if inDoubt {
				cur, _, gerr := l.lv.leases.GetFromLeader(ctx, l.lv.js, l.key)
				if landed(cur, gerr) {
					l.end()
					return nil
				}
			}
			return l.lose(fmt.Errorf("%w: %s of run %s at revision %d: %w", ErrLost, op, l.key, rev, err))
		default:
			l.mu.Lock()
			l.doubt = true
			l.mu.Unlock()
			l.log.Warn().Err(err).Str("op", op).Msg("lease write failed; retrying")
			if !l.lv.clock.Sleep(ctx, retryPause) {
				return fmt.Errorf("lease: %s of run %s: %w (last error: %w)", op, l.key, ctx.Err(), err)
			}
		}
	}
}

func (l *Lease) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	l.lv.unregister(l)
}

func (l *Lease) lose(err error) error {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	err = l.err
	l.mu.Unlock()
	l.once.Do(func() {
		l.log.Warn().Err(err).Msg("lease lost")
		close(l.lost)
	})
	l.lv.unregister(l)
	return err
}
