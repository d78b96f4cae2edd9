package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/protocol"
)

// ErrKeyFull: every slot of the key below its limit is held.
var ErrKeyFull = errors.New("tenancy: the key runs as many jobs as its limit allows")

// Slots are the cluster's key slots as this worker sees them (a watch of
// the slots bucket, started anew every resync, since a watch may fall
// silent through a server's loss) and the writes that claim, bind and
// release them. The bucket decides every race: a slot is claimed by
// creating its key, which fails if it exists, so at most limit slots of a
// key below its limit exist however many workers claim at once. The view
// only spares creates that would fail.
type Slots struct {
	kv     jetstream.KeyValue
	worker string
	log    zerolog.Logger
	resync time.Duration
	// unbound and sweep are unboundGrace and sweepEvery (tests shorten
	// them).
	unbound, sweep time.Duration

	mu      sync.Mutex
	held    map[string]heldSlot // by slot key
	changed chan struct{}       // a slot was deleted: a key may have room
}

type heldSlot struct {
	protocol.KeySlot
	rev uint64
}

// NewSlots returns the slots of bucket kv as worker sees them; Run keeps
// the view.
func NewSlots(kv jetstream.KeyValue, worker string, log zerolog.Logger) *Slots {
	return &Slots{kv: kv, worker: worker, log: log, resync: 30 * time.Second, unbound: unboundGrace, sweep: sweepEvery,
		held: map[string]heldSlot{}, changed: make(chan struct{}, 1)}
}

// Run watches the bucket until ctx ends, and frees every sweepEvery the
// unbound slots claimed more than unboundGrace ago (their worker died
// between a claim and its job's take).
func (s *Slots) Run(ctx context.Context) {
	var sweeper sync.WaitGroup
	defer sweeper.Wait()
	sweeper.Go(func() {
		t := time.NewTicker(s.sweep)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sweepUnbound(ctx)
			}
		}
	})
	for ctx.Err() == nil {
		if err := s.watch(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("watch the key slots; again in a second")
			clock.Sleep(ctx, time.Second)
		}
	}
}

// watch reads the whole bucket, then its changes, until the resync.
func (s *Slots) watch(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, s.resync)
	defer cancel()
	w, err := s.kv.WatchAll(wctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	fresh, initial := map[string]heldSlot{}, true
	for {
		select {
		case <-wctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil { // the bucket's state, read whole
				s.mu.Lock()
				s.held = fresh
				s.mu.Unlock()
				initial = false
				s.signal()
				continue
			}
			if initial {
				if e.Operation() == jetstream.KeyValuePut {
					fresh[e.Key()] = decodeSlot(e)
				}
				continue
			}
			s.apply(e)
		}
	}
}

func decodeSlot(e jetstream.KeyValueEntry) heldSlot {
	var v protocol.KeySlot
	_ = json.Unmarshal(e.Value(), &v) // a slot that does not parse still counts
	return heldSlot{v, e.Revision()}
}

func (s *Slots) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	if e.Operation() == jetstream.KeyValuePut {
		s.held[e.Key()] = decodeSlot(e)
		s.mu.Unlock()
		return
	}
	if h, ok := s.held[e.Key()]; ok && h.rev < e.Revision() {
		delete(s.held, e.Key())
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Slots) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Changed receives after a slot was deleted anywhere in the cluster.
func (s *Slots) Changed() <-chan struct{} { return s.changed }

// Held counts key's slots, as seen.
func (s *Slots) Held(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.held {
		if sk, _, ok := protocol.ParseSlotKey(k); ok && sk == key {
			n++
		}
	}
	return n
}

// Keys lists the keys holding slots, as seen.
func (s *Slots) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.held {
		if key, _, ok := protocol.ParseSlotKey(k); ok && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// Slot is a claimed slot.
type Slot struct {
	s   *Slots
	Key string // the slot's key in the bucket
	rev uint64
}

// Acquire claims a free slot of key below limit (> 0).
func (s *Slots) Acquire(ctx context.Context, key string, limit int) (*Slot, error) {
	s.mu.Lock()
	var free []string
	for i := range limit {
		if k := protocol.SlotKey(key, i); !s.hasLocked(k) {
			free = append(free, k)
		}
	}
	s.mu.Unlock()
	val, _ := json.Marshal(protocol.KeySlot{Worker: s.worker, At: time.Now().UTC()})
	for _, k := range free {
		rev, err := s.kv.Create(ctx, k, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tenancy: claim slot %s: %w", k, err)
		}
		s.put(k, heldSlot{protocol.KeySlot{Worker: s.worker, At: time.Now().UTC()}, rev})
		return &Slot{s: s, Key: k, rev: rev}, nil
	}
	return nil, fmt.Errorf("%w (%s, %d)", ErrKeyFull, key, limit)
}

func (s *Slots) hasLocked(k string) bool { _, ok := s.held[k]; return ok }

func (s *Slots) put(k string, h heldSlot) {
	s.mu.Lock()
	if cur, ok := s.held[k]; !ok || cur.rev < h.rev {
		s.held[k] = h
	}
	s.mu.Unlock()
}

// Bind names the run the slot is for; from then on it is released when
// the run has ended.
func (sl *Slot) Bind(ctx context.Context, runID string) error {
	v := protocol.KeySlot{RunID: runID, Worker: sl.s.worker, At: time.Now().UTC()}
	val, _ := json.Marshal(v)
	rev, err := sl.s.kv.Update(ctx, sl.Key, val, sl.rev)
	if err != nil {
		return fmt.Errorf("tenancy: bind slot %s to run %s: %w", sl.Key, runID, err)
	}
	sl.rev = rev
	sl.s.put(sl.Key, heldSlot{v, rev})
	return nil
}

// Release gives the slot back, unless someone else wrote it since.
func (sl *Slot) Release(ctx context.Context) {
	sl.s.del(ctx, sl.Key, sl.rev)
}

// del deletes slot k if it is still at rev; false when the delete failed
// (a rewritten slot is not ours to delete: true).
func (s *Slots) del(ctx context.Context, k string, rev uint64) bool {
	err := s.kv.Delete(ctx, k, jetstream.LastRevision(rev))
	if err != nil && !isWrongRevision(err) {
		s.log.Warn().Err(err).Str("slot", k).Msg("release key slot")
		return false
	}
	s.mu.Lock()
	if h, ok := s.held[k]; ok && h.rev == rev {
		delete(s.held, k)
	}
	s.mu.Unlock()
	s.signal()
	return true
}

// isWrongRevision: the slot was written since (by a reaper, or claimed
// again): it is not ours to delete.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Renew rewrites the slot bound to runID, a redelivered job's run, with
// the time now, so no reaper frees it while the run is started again: a
// compare-and-set on the revision seen. False when the run holds no slot
// (or it was freed or rewritten since).
func (s *Slots) Renew(ctx context.Context, runID string) bool {
	for _, r := range s.slotsOf(func(h heldSlot) bool { return h.RunID == runID }) {
		v := protocol.KeySlot{RunID: runID, Worker: s.worker, At: time.Now().UTC()}
		val, _ := json.Marshal(v)
		if rev, err := s.kv.Update(ctx, r.key, val, r.rev); err == nil {
			s.put(r.key, heldSlot{v, rev})
			return true
		}
	}
	return false
}

// RunSlot is the slot bound to runID, if any is seen.
func (s *Slots) RunSlot(runID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, h := range s.held {
		if h.RunID == runID {
			return k, true
		}
	}
	return "", false
}

// ReleaseRun releases every slot bound to runID, whose run has ended,
// trying again every releaseRetry until ctx ends (a server restarting):
// a slot left behind is freed only when its key is full.
func (s *Slots) ReleaseRun(ctx context.Context, runID string) {
	for _, k := range s.slotsOf(func(h heldSlot) bool { return h.RunID == runID }) {
		for !s.del(ctx, k.key, k.rev) && clock.Sleep(ctx, releaseRetry) {
		}
	}
}

// releaseRetry spaces the tries of a slot's release.
const releaseRetry = 250 * time.Millisecond

type slotRef struct {
	key string
	rev uint64
	heldSlot
}

func (s *Slots) slotsOf(match func(heldSlot) bool) []slotRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slotRef
	for k, h := range s.held {
		if match(h) {
			out = append(out, slotRef{k, h.rev, h})
		}
	}
	return out
}

// RunState is what a slot's run has become.
type RunState int

// Run states for Reap.
const (
	RunLive     RunState = iota // its record is not terminal
	RunEnded                    // its record is terminal
	RunNoRecord                 // it has no record (yet, or any more)
)

// RunStates reads a run's state.
type RunStates func(ctx context.Context, runID string) (RunState, error)

// unboundGrace: an unbound slot's claim and bind are one job's take
// apart; older, its worker died between them. sweepEvery spaces the
// looks for them: the view is local, so a look costs nothing but the
// deletes it finds to do.
const (
	unboundGrace = 30 * time.Second
	sweepEvery   = 10 * time.Second
)

// sweepUnbound frees the unbound slots claimed more than unboundGrace ago.
func (s *Slots) sweepUnbound(ctx context.Context) {
	now := time.Now()
	for _, r := range s.slotsOf(func(h heldSlot) bool { return h.RunID == "" && now.Sub(h.At) > s.unbound }) {
		s.log.Info().Str("slot", r.key).Str("claimed_by", r.Worker).Msg("free a key slot claimed and never bound")
		s.del(ctx, r.key, r.rev)
	}
}

// Reap frees key's slots whose runs have ended, the unbound ones claimed
// more than unboundGrace ago, and the bound ones whose run has had no
// record for recordGrace (a job's redelivery may take AckWait to create
// it). Each delete is a compare-and-set on the revision seen, so a slot
// rewritten since is left alone. It returns how many it freed.
func (s *Slots) Reap(ctx context.Context, key string, states RunStates, recordGrace time.Duration) int {
	now := time.Now()
	n := 0
	for _, r := range s.slotsOf(func(heldSlot) bool { return true }) {
		if sk, _, ok := protocol.ParseSlotKey(r.key); !ok || sk != key {
			continue
		}
		age := now.Sub(r.At)
		free := r.RunID == "" && age > s.unbound
		if r.RunID != "" {
			st, err := states(ctx, r.RunID)
			free = err == nil && (st == RunEnded || st == RunNoRecord && age > recordGrace)
		}
		if free {
			s.log.Info().Str("slot", r.key).Str("run_id", r.RunID).Dur("age", age).Msg("free the key slot of an ended run")
			s.del(ctx, r.key, r.rev)
			n++
		}
	}
	return n
}
