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

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
)

// validName is what a node or worker id must be to name a liveness key.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// LiveKey is the liveness key of worker on node. Run ids have no dots, so
// it never collides with a run's lease key.
func LiveKey(node, worker string) string { return "live." + node + "." + worker }

// LiveKeys is the key filter of the liveness keys of node's workers.
func LiveKeys(node string) string { return "live." + node + ".>" }

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
	clock  clock.Clock // what renewals are timed on and sent at
	// onSession is told each new session's id (WithOnSession), nil if none.
	onSession func(id uint64)

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
	o := options{log: zerolog.Nop(), clock: clock.Real}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	lv := &Liveness{
		js: js, leases: store, live: kv.NewStore[kv.LiveRecord](store.KV()),
		holder: h, key: LiveKey(h.Node, h.Worker),
		ttl: ttl, every: ttl / 3, margin: ttl / 6, log: o.log, clock: o.clock, onSession: o.onSession,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	// A key left by an earlier process of the same worker id expires
	// within a TTL; one still renewed after two is another live process
	// using this id.
	for end := lv.clock.Now().Add(2 * ttl); ; {
		err := lv.open(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, kv.ErrExists) || lv.clock.Now().After(end) {
			return nil, err
		}
		if !lv.clock.Sleep(ctx, lv.retry()) {
			return nil, fmt.Errorf("lease: open liveness %s: %w (after %w)", lv.key, ctx.Err(), err)
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
		lv.next = &pending{id: newSessionID(), sent: lv.clock.Now()}
	}
	p := lv.next
	lost := lv.lost
	lv.mu.Unlock()
	val := kv.LiveRecord{Worker: lv.holder.Worker, Node: lv.holder.Node, Session: p.id}
	sent := lv.clock.Now()
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
	lv.next, lv.lost = nil, nil
	if lv.closed {
		lv.mu.Unlock()
		return ErrNotLive
	}
	lv.sess = &session{id: p.id, rev: rev, lastOK: sent, leases: map[string]*Lease{}, acquiring: map[string]bool{}}
	lv.mu.Unlock()
	lv.log.Debug().Uint64("session", p.id).Msg("liveness session opened")
	if lv.onSession != nil {
		lv.onSession(p.id)
	}
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

// retry is the pause before another try to open or renew the liveness.
func (lv *Liveness) retry() time.Duration { return max(lv.every/4, 10*time.Millisecond) }

// loop renews the current session, and opens a new one after a loss.
func (lv *Liveness) loop() {
	defer close(lv.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Close interrupts a write in flight
		<-lv.stop
		cancel()
	}()
	retry := lv.retry()
	tick := lv.clock.NewTimer(lv.every)
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
			case <-tick.C():
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
		wait := lv.clock.NewTimer(deadline.Sub(lv.clock.Now()))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C():
			lv.lose(s, fmt.Errorf("%w: liveness %s: no successful renewal within %s", ErrLost, lv.key, lv.ttl-lv.margin))
			tick.Reset(retry)
		case <-tick.C():
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
	actx, cancel := context.WithTimeout(ctx, deadline.Sub(lv.clock.Now()))
	defer cancel()
	sent := lv.clock.Now()
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
