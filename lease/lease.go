package lease

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

// validName is what a node or worker id must be to name a liveness key.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// LiveKey is the liveness key of worker on node. Run ids have no dots, so
// it never collides with a run's lease key.
func LiveKey(node, worker string) string { return "live." + node + "." + worker }

// LiveKeys is the key filter of the liveness keys of node's workers.
func LiveKeys(node string) string { return "live." + node + ".>" }

// Option configures a Liveness.
type Option func(*options)

type options struct {
	log        zerolog.Logger
	renewEvery time.Duration
}

// WithLogger sets the logger for renewals and losses.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// Liveness is a worker's liveness key, standing for every lease it holds.
type Liveness struct {
	js     jetstream.JetStream
	leases *kv.Leases
	live   *kv.Store[kv.LiveRecord]
	holder Holder
	key    string
	ttl    time.Duration
	every  time.Duration
	margin time.Duration
	log    zerolog.Logger

	mu   sync.Mutex
	sess *session // nil between a loss and the next session, and once closed
	next *pending // a session being opened whose Create may have landed
	// lost is this process's lost session, whose key the next session
	// replaces at once instead of waiting it out; nil if none.
	lost   *session
	closed bool

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	beforeRegister func(runID string) // a test's hook: a reply that comes late
}

// session is one life of the liveness key: its value's random id, and the
// leases taken in it.
type session struct {
	id     uint64
	rev    uint64    // revision of our last write known to have landed
	lastOK time.Time // when the write at rev was sent (its TTL runs from later)
	doubt  time.Time // when the first write of unknown outcome since lastOK was sent
	leases map[string]*Lease
	// acquiring holds the runs whose Acquire is under way in this process:
	// a second Acquire of one of them must not take the first's write, not
	// yet registered, for a dead holder's.
	acquiring map[string]bool
	err       error // why it was lost; nil while live
}

type pending struct {
	id   uint64
	sent time.Time // the first attempt's
}

// Live opens the liveness of worker h, whose leases are in store, and
// renews it in the background every TTL/3 until Close. ttl is the lease TTL:
// a worker dead that long has lost its leases. A key left by a dead
// process of the same worker id is waited out (at most a TTL). A session
// lost later (no renewal within TTL - TTL/6) is replaced by a new one as
// soon as NATS answers: the key is overwritten, since this process gave
// the lost session's leases up already.
func Live(ctx context.Context, js jetstream.JetStream, store *kv.Leases, h Holder, ttl time.Duration, opts ...Option) (*Liveness, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("lease: ttl must be positive, got %s", ttl)
	}
	if !validName.MatchString(h.Node) || !validName.MatchString(h.Worker) {
		return nil, fmt.Errorf("lease: node %q and worker %q must be 1 to 128 letters, digits, '_' or '-'", h.Node, h.Worker)
	}
	o := options{log: zerolog.Nop(), renewEvery: ttl / 3}
	for _, opt := range opts {
		opt(&o)
	}
	lv := &Liveness{
		js: js, leases: store, live: kv.NewStore[kv.LiveRecord](store.KV()),
		holder: h, key: LiveKey(h.Node, h.Worker),
		ttl: ttl, every: o.renewEvery, margin: ttl / 6, log: o.log,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	// A key left by an earlier process of the same worker id expires
	// within a TTL; one still renewed after two is another live process
	// using this id.
	for end := time.Now().Add(2 * ttl); ; {
		err := lv.open(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, kv.ErrExists) || time.Now().After(end) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lease: open liveness %s: %w (after %w)", lv.key, ctx.Err(), err)
		case <-time.After(max(lv.every/4, 10*time.Millisecond)):
		}
	}
	go lv.loop()
	return lv, nil
}

// Session is the id of the current session, 0 while there is none.
func (lv *Liveness) Session() uint64 {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.sess == nil {
		return 0
	}
	return lv.sess.id
}

// EndDead ends the liveness of another worker whose process is known to
// have exited (a worker of the same node saw it go, see package worker):
// the key live.<node>.<worker> is deleted if it still names session, at
// the revision read, so a later session of the same worker id is never
// touched. Its leases are then free, as after the key's expiry, without
// waiting out the TTL, and the node's workers see the delete. It reports
// whether it deleted the key; a key gone, or of another session, is left.
func (lv *Liveness) EndDead(ctx context.Context, node, worker string, session uint64) (bool, error) {
	if !validName.MatchString(node) || !validName.MatchString(worker) || session == 0 {
		return false, fmt.Errorf("lease: end the liveness of %q on %q, session %d: not a liveness key", worker, node, session)
	}
	if node == lv.holder.Node && worker == lv.holder.Worker {
		return false, fmt.Errorf("lease: %s would end its own liveness", worker)
	}
	key := LiveKey(node, worker)
	// From the leader, as heldLive reads it.
	rec, rev, err := lv.live.GetFromLeader(ctx, lv.js, key)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case rec.Session != session || rec.Worker != worker || rec.Node != node:
		return false, nil
	}
	if err := lv.live.Delete(ctx, key, rev); errors.Is(err, kv.ErrConflict) || errors.Is(err, kv.ErrNotFound) {
		return false, nil // written again since: not the dead session's any more
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// open starts a session: it creates the liveness key with a new id, or
// overwrites the one of this process's lost session. A write of unknown
// outcome is retried with the same id, and found landed by reading the key.
func (lv *Liveness) open(ctx context.Context) error {
	lv.mu.Lock()
	if lv.next == nil {
		lv.next = &pending{id: newSessionID(), sent: time.Now()}
	}
	p := lv.next
	lost := lv.lost
	lv.mu.Unlock()
	val := kv.LiveRecord{Worker: lv.holder.Worker, Node: lv.holder.Node, Session: p.id}
	sent := time.Now()
	var rev uint64
	err := kv.ErrExists
	if lost != nil {
		// Our own session was lost: this process has given up its leases
		// already (each Lease.Lost is closed), so the key may name the
		// new session at once, and the old session's leases are free to
		// take, fenced by the chain as any takeover (I1). Waiting the key
		// out would leave the worker unable to take any run for up to a
		// TTL after every NATS outage.
		rev, err = lv.replaceLost(ctx, lost, val)
	}
	if errors.Is(err, kv.ErrExists) {
		rev, err = lv.live.CreateTTL(ctx, lv.key, val, lv.ttl)
	}
	if errors.Is(err, kv.ErrExists) {
		cur, curRev, gerr := lv.live.GetFromLeader(ctx, lv.js, lv.key)
		if gerr != nil || cur != val {
			return fmt.Errorf("lease: open liveness %s: %w", lv.key, err)
		}
		rev, sent, err = curRev, p.sent, nil // an earlier attempt landed
	}
	if err != nil {
		return fmt.Errorf("lease: open liveness %s: %w", lv.key, err)
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.next, lv.lost = nil, nil
	if lv.closed {
		return ErrNotLive
	}
	lv.sess = &session{id: p.id, rev: rev, lastOK: sent, leases: map[string]*Lease{}, acquiring: map[string]bool{}}
	lv.log.Debug().Uint64("session", p.id).Msg("liveness session opened")
	return nil
}

// replaceLost writes val over the liveness key while it still holds the
// lost session's value, at whatever revision (a renewal of unknown outcome
// may have landed). kv.ErrExists means it is gone or another's: create.
func (lv *Liveness) replaceLost(ctx context.Context, lost *session, val kv.LiveRecord) (uint64, error) {
	lv.mu.Lock()
	rev := lost.rev
	lv.mu.Unlock()
	for range 2 {
		nrev, err := lv.live.UpdateTTL(ctx, lv.js, lv.key, val, rev, lv.ttl)
		if !errors.Is(err, kv.ErrConflict) && !errors.Is(err, kv.ErrNotFound) {
			return nrev, err
		}
		cur, curRev, gerr := lv.live.GetFromLeader(ctx, lv.js, lv.key)
		switch {
		case gerr == nil && cur == val:
			return curRev, nil // an earlier attempt of ours landed
		case gerr == nil && cur.Session == lost.id && curRev != rev:
			rev = curRev
		case gerr != nil && !errors.Is(gerr, kv.ErrNotFound):
			return 0, gerr
		default:
			lv.mu.Lock()
			if lv.lost == lost {
				lv.lost = nil
			}
			lv.mu.Unlock()
			return 0, kv.ErrExists
		}
	}
	return 0, kv.ErrExists
}

func newSessionID() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// loop renews the current session, and opens a new one after a loss.
func (lv *Liveness) loop() {
	defer close(lv.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Close interrupts a write in flight
		<-lv.stop
		cancel()
	}()
	retry := max(lv.every/4, 10*time.Millisecond)
	tick := time.NewTimer(lv.every)
	defer tick.Stop()
	for {
		lv.mu.Lock()
		s := lv.sess
		var deadline time.Time
		if s != nil {
			deadline = s.lastOK.Add(lv.ttl - lv.margin)
		}
		lv.mu.Unlock()
		if s == nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			octx, ocancel := context.WithTimeout(ctx, lv.every)
			err := lv.open(octx)
			ocancel()
			if err != nil {
				// The lost session's key has not expired yet (ErrExists),
				// or NATS is away.
				lv.log.Debug().Err(err).Msg("liveness not reopened yet")
				tick.Reset(retry)
			} else {
				lv.log.Info().Msg("liveness renewed in a new session; the leases of the lost one stay lost")
				tick.Reset(lv.every)
			}
			continue
		}
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
			lv.lose(s, fmt.Errorf("%w: liveness %s: no successful renewal within %s", ErrLost, lv.key, lv.ttl-lv.margin))
			tick.Reset(retry)
		case <-tick.C:
			wait.Stop()
			if lv.renew(ctx, s, deadline) {
				tick.Reset(lv.every)
			} else {
				tick.Reset(retry)
			}
		}
	}
}

// renew writes the liveness key once at the session's revision, with a
// fresh TTL. It reports whether the write landed.
func (lv *Liveness) renew(ctx context.Context, s *session, deadline time.Time) bool {
	lv.mu.Lock()
	rev := s.rev
	lv.mu.Unlock()
	val := kv.LiveRecord{Worker: lv.holder.Worker, Node: lv.holder.Node, Session: s.id}
	// Waiting past the deadline is pointless: the session counts as lost then.
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	newRev, err := lv.live.UpdateTTL(actx, lv.js, lv.key, val, rev, lv.ttl)
	switch {
	case err == nil:
		lv.mu.Lock()
		s.rev, s.lastOK, s.doubt = newRev, sent, time.Time{}
		lv.mu.Unlock()
		return true
	case errors.Is(err, kv.ErrConflict):
		lv.mu.Lock()
		inDoubt := !s.doubt.IsZero()
		lv.mu.Unlock()
		if inDoubt {
			// An earlier renewal of unknown outcome may be the write that
			// moved the revision: read the key to tell.
			cur, curRev, gerr := lv.live.GetFromLeader(actx, lv.js, lv.key)
			switch {
			case gerr == nil && cur == val && curRev > rev:
				lv.mu.Lock()
				// Its TTL is counted from the first write in doubt, the
				// earliest it can have been sent.
				s.rev, s.lastOK, s.doubt = curRev, s.doubt, time.Time{}
				lv.mu.Unlock()
				return false // renew again soon, from the adopted revision
			case gerr != nil && !errors.Is(gerr, kv.ErrNotFound):
				return false // the deadline decides if it never clears
			}
		}
		lv.lose(s, fmt.Errorf("%w: liveness %s: revision %d is no longer current (expired or removed): %w", ErrLost, lv.key, rev, err))
		return false
	default:
		// Timed out or disconnected: the write may still land.
		lv.mu.Lock()
		if s.doubt.IsZero() {
			s.doubt = sent
		}
		lv.mu.Unlock()
		if ctx.Err() == nil {
			lv.log.Warn().Err(err).Msg("liveness renewal failed; retrying")
		}
		return false
	}
}

// lose ends session s and every lease taken in it.
func (lv *Liveness) lose(s *session, err error) {
	lv.mu.Lock()
	if s.err != nil {
		lv.mu.Unlock()
		return
	}
	s.err = err
	leases := s.leases
	s.leases = nil
	if lv.sess == s {
		lv.sess, lv.lost = nil, s
	}
	lv.mu.Unlock()
	if len(leases) > 0 || !errors.Is(err, ErrNotLive) {
		lv.log.Warn().Err(err).Int("leases", len(leases)).Msg("liveness lost: every lease of the session is lost")
	}
	for _, l := range leases {
		l.lose(err)
	}
}

// Close stops renewing and removes the liveness key (by compare-and-set,
// leaving a short-lived marker), so the node's other workers recover at once
// what this worker still holds: every lease left is lost. Release or Delete
// leases before, to hand them off.
func (lv *Liveness) Close(ctx context.Context) error {
	lv.stopOnce.Do(func() { close(lv.stop) })
	<-lv.done
	lv.mu.Lock()
	s := lv.sess
	lv.closed = true
	lv.mu.Unlock()
	if s == nil {
		return nil
	}
	lv.lose(s, fmt.Errorf("%w: liveness %s closed", ErrNotLive, lv.key))
	lv.mu.Lock()
	rev := s.rev
	lv.mu.Unlock()
	if err := lv.live.Purge(ctx, lv.key, rev, markerTTL); err != nil && !errors.Is(err, kv.ErrConflict) {
		return fmt.Errorf("lease: close liveness %s: %w", lv.key, err)
	}
	return nil
}

// current is the live session, or ErrNotLive.
func (lv *Liveness) current() (*session, error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.sess == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotLive, lv.key)
	}
	return lv.sess, nil
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
		return e.Revision != rev || time.Since(e.Created) < lv.ttl, nil
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
		t := time.NewTimer(l.ttl)
		defer t.Stop()
		select {
		case <-t.C:
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
			select {
			case <-ctx.Done():
				return fmt.Errorf("lease: %s of run %s: %w (last error: %w)", op, l.key, ctx.Err(), err)
			case <-time.After(retryPause):
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
