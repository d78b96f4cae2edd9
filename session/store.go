package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// Errors of the store; each wraps one of these.
var (
	// ErrRefused: the job cannot be a run of the session (another
	// profile, a deleted session).
	ErrRefused = errors.New("session: refused")
	// ErrNotFound: no such session (or checkpoint of it).
	ErrNotFound = errors.New("session: not found")
	// ErrExists: a session of that id exists.
	ErrExists = errors.New("session: exists")
	// ErrLive: the session has a live run.
	ErrLive = errors.New("session: has a live run")
	// ErrInvalidOption: an option was given a value it cannot take.
	ErrInvalidOption = errors.New("session: invalid option")
)

// Store reads and changes session records, and deletes the checkpoint
// objects no session uses any more.
type Store struct {
	recs  *kv.Store[kv.SessionRecord]
	obs   jetstream.ObjectStore
	clock clock.Clock
	keep  int
}

// Option configures a Store.
type Option func(*Store) error

// WithKeep sets how many checkpoints a session keeps (default
// DefaultKeep, at least 1).
func WithKeep(n int) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("%w: keep %d: a session keeps at least its head", ErrInvalidOption, n)
		}
		s.keep = n
		return nil
	}
}

// WithClock sets the clock that stamps records.
func WithClock(c clock.Clock) Option {
	return func(s *Store) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		s.clock = c
		return nil
	}
}

// NewStore returns a Store of the sessions bucket recs and the
// checkpoints bucket obs.
func NewStore(recs *kv.Store[kv.SessionRecord], obs jetstream.ObjectStore, opts ...Option) (*Store, error) {
	s := &Store{recs: recs, obs: obs, clock: clock.Real, keep: DefaultKeep}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// Get reads the session id; a deleted one is not found.
func (s *Store) Get(ctx context.Context, id string) (kv.SessionRecord, uint64, error) {
	rec, rev, err := s.recs.Get(ctx, id)
	if errors.Is(err, kv.ErrNotFound) || err == nil && rec.Deleted {
		return kv.SessionRecord{}, 0, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	return rec, rev, err
}

// Claimed is what Claim decided.
type Claimed struct {
	// Wait: another run of the session is live; Why says which.
	Wait bool
	Why  string
	// Record is the session's record as claimed; Added tells whether the
	// claim listed the run among its runs (Unclaim takes it off again).
	Record kv.SessionRecord
	Added  bool
}

// RunLookup reads a run's record: nil (and no error) when it has none.
type RunLookup func(ctx context.Context, runID string) (*kv.RunRecord, error)

// Claim makes run, of profile, the live run of the session id, creating
// the session (with labels) if it has none, unless another run of it is
// live (Claimed.Wait). A live run whose record says it ended is ended
// first (its holder died before it could), one that never started is
// replaced. A session of another profile, or deleted, is refused
// (ErrRefused).
func (s *Store) Claim(ctx context.Context, id, profile, run string, labels map[string]string, lookup RunLookup) (Claimed, error) {
	for try := 0; ; try++ {
		rec, rev, err := s.recs.Get(ctx, id)
		if errors.Is(err, kv.ErrNotFound) {
			now := s.now()
			rec = kv.SessionRecord{ID: id, Profile: profile, Labels: maps.Clone(labels), CreatedAt: now}
			begin(&rec, run, now)
			if _, err := s.recs.Create(ctx, id, rec); errors.Is(err, kv.ErrExists) && try < 10 {
				continue
			} else if err != nil {
				return Claimed{}, err
			}
			return Claimed{Record: rec, Added: true}, nil
		}
		if err != nil {
			return Claimed{}, err
		}
		var live *kv.RunRecord
		if rec.Live != "" && rec.Live != run {
			if live, err = lookup(ctx, rec.Live); err != nil {
				return Claimed{}, err
			}
		}
		v, why := claim(&rec, profile, run, live, s.now())
		var f fates
		switch v {
		case refuse:
			return Claimed{}, fmt.Errorf("%w: %s", ErrRefused, why)
		case wait:
			return Claimed{Wait: true, Why: why, Record: rec}, nil
		case takeOver:
			if live != nil {
				f, _ = end(&rec, rec.Live, live.State == kv.RunState(protocol.StatusPaused), live.Checkpoint, "", s.keep, live.Usage, s.now())
			}
		}
		added := begin(&rec, run, s.now())
		if _, err := s.recs.Update(ctx, id, rec, rev); errors.Is(err, kv.ErrConflict) && try < 10 {
			continue
		} else if err != nil {
			return Claimed{}, err
		}
		s.apply(ctx, id, f)
		return Claimed{Record: rec, Added: added}, nil
	}
}

// Unclaim gives up run's claim of the session id (c, as Claim returned
// it): its job was refused after the claim (a duplicate runId), so it
// never ran, and is taken off the session's runs if the claim listed it.
func (s *Store) Unclaim(ctx context.Context, id, run string, c Claimed) error {
	_, _, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		if rec.Live != run {
			return kv.ErrUnchanged
		}
		rec.Live, rec.LiveSince, rec.State, rec.UpdatedAt = "", time.Time{}, kv.SessionIdle, s.now()
		if c.Added {
			rec.Runs = slices.DeleteFunc(rec.Runs, func(r string) bool { return r == run })
			rec.RunCount--
		}
		return nil
	})
	return err
}

// SetWaiting records whether run, the session's live run, waits for
// input (a turn ended) or runs a turn.
func (s *Store) SetWaiting(ctx context.Context, id, run string, waiting bool) error {
	state := kv.SessionActive
	if waiting {
		state = kv.SessionWaiting
	}
	_, _, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		if rec.Live != run || rec.State == state {
			return kv.ErrUnchanged
		}
		rec.State, rec.UpdatedAt = state, s.now()
		return nil
	})
	return err
}

// End records that run, the live run of the session id, ended (paused,
// or not), with the checkpoint its terminal status named (nil: none;
// cpErr says why when one failed): the checkpoint becomes the head, and
// the session keeps the last keep (0: the store's); the run's usage (used,
// nil: none known) is added to the session's. A run that is not the live
// one (its end was recorded already) changes nothing.
func (s *Store) End(ctx context.Context, id, run string, paused bool, cp *kv.SessionCheckpoint, cpErr string, keep int, used *protocol.Usage) error {
	if keep <= 0 {
		keep = s.keep
	}
	var f fates
	_, _, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		var ok bool
		if f, ok = end(rec, run, paused, cp, cpErr, keep, used, s.now()); !ok {
			return kv.ErrUnchanged
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.apply(ctx, id, f)
	return nil
}

// Setup makes cp, the checkpoint the session's setup made in run, its
// live run, before the agent started, the session's head: later runs start
// from it without running setup again. Stored again (by a successor) it
// changes nothing; a run that is not the live one changes nothing.
func (s *Store) Setup(ctx context.Context, id, run string, cp kv.SessionCheckpoint, keep int) error {
	if keep <= 0 {
		keep = s.keep
	}
	var f fates
	_, _, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		var ok bool
		if f, ok = setup(rec, run, cp, keep, s.now()); !ok {
			return kv.ErrUnchanged
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.apply(ctx, id, f)
	return nil
}

// Lost records that run, the live run of the session id, was lost with
// its node.
func (s *Store) Lost(ctx context.Context, id, run string) error {
	_, _, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		if !lost(rec, run, s.now()) {
			return kv.ErrUnchanged
		}
		return nil
	})
	return err
}

// Fork makes the session id from the checkpoint n of src (-1: its head),
// without copying it: src keeps the checkpoint's objects while id uses
// them.
func (s *Store) Fork(ctx context.Context, src string, n int, id string, labels map[string]string) (kv.SessionRecord, error) {
	from, _, err := s.Get(ctx, src)
	if err != nil {
		return kv.SessionRecord{}, err
	}
	cp, ok := checkpointOf(&from, n)
	if !ok {
		what := fmt.Sprintf("checkpoint %d", n)
		if n < 0 {
			what = "a checkpoint"
		}
		return kv.SessionRecord{}, fmt.Errorf("%w: session %s has no %s (it keeps %s)", ErrNotFound, src, what, kept(&from))
	}
	if _, _, err := s.recs.Get(ctx, id); err == nil {
		return kv.SessionRecord{}, fmt.Errorf("%w: session %s", ErrExists, id)
	}
	rec, borrowed := fork(&from, cp, id, labels, s.now())
	// Borrowed first: a source that drops a checkpoint meanwhile keeps
	// what the fork will use. A fork that fails after leaves a borrow
	// no session makes good, which only keeps objects longer.
	for _, owner := range slices.Sorted(maps.Keys(borrowed)) {
		if _, _, err := s.modify(ctx, owner, func(o *kv.SessionRecord) error {
			if owner == src && !slices.ContainsFunc(o.Checkpoints, func(c kv.SessionCheckpoint) bool { return c.Object == cp.Object }) {
				return fmt.Errorf("%w: session %s dropped the checkpoint meanwhile", ErrNotFound, src)
			}
			borrow(o, id, borrowed[owner])
			return nil
		}); err != nil {
			return kv.SessionRecord{}, err
		}
	}
	if _, err := s.recs.Create(ctx, id, *rec); errors.Is(err, kv.ErrExists) {
		s.apply(ctx, id, fates{release: borrowed})
		return kv.SessionRecord{}, fmt.Errorf("%w: session %s", ErrExists, id)
	} else if err != nil {
		return kv.SessionRecord{}, err
	}
	return *rec, nil
}

// kept lists the numbers of rec's checkpoints, for an error.
func kept(rec *kv.SessionRecord) string {
	if len(rec.Checkpoints) == 0 {
		return "none"
	}
	ns := make([]int, len(rec.Checkpoints))
	for i, c := range rec.Checkpoints {
		ns[i] = c.N
	}
	return fmt.Sprint(ns)
}

// Delete deletes the session id and the checkpoint objects only it used;
// a session with a live run is refused (ErrLive).
func (s *Store) Delete(ctx context.Context, id string) error {
	var f fates
	var tomb bool
	_, rev, err := s.modify(ctx, id, func(rec *kv.SessionRecord) error {
		if rec.Deleted {
			return fmt.Errorf("%w: session %s", ErrNotFound, id)
		}
		if rec.Live != "" {
			return fmt.Errorf("%w: session %s: its run %s is live; cancel it first", ErrLive, id, rec.Live)
		}
		f, tomb = remove(rec, s.now())
		return nil
	})
	if errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	if !tomb {
		if err := s.recs.Delete(ctx, id, rev); err != nil && !errors.Is(err, kv.ErrConflict) {
			return err
		}
	}
	s.apply(ctx, id, f)
	return nil
}

// apply deletes f's objects and releases what the session id borrowed.
// A failure only leaves an object longer in the bucket, bounded by its
// size: nothing refers to it any more.
func (s *Store) apply(ctx context.Context, id string, f fates) {
	s.deleteObjects(ctx, f.del)
	for _, owner := range slices.Sorted(maps.Keys(f.release)) {
		var del []string
		var gone bool
		_, rev, err := s.modify(ctx, owner, func(o *kv.SessionRecord) error {
			del = release(o, id, f.release[owner])
			gone = o.Deleted && len(o.Lent) == 0
			return nil
		})
		if err != nil {
			continue
		}
		if gone {
			_ = s.recs.Delete(ctx, owner, rev)
		}
		s.deleteObjects(ctx, del)
	}
}

func (s *Store) deleteObjects(ctx context.Context, objs []string) {
	for _, o := range objs {
		for _, name := range []string{checkpoint.ManifestName(o), o} {
			_ = s.obs.Delete(ctx, name)
		}
	}
}

// modify is the records' Modify, with a missing session said so.
func (s *Store) modify(ctx context.Context, id string, fn func(*kv.SessionRecord) error) (kv.SessionRecord, uint64, error) {
	rec, rev, err := s.recs.Modify(ctx, id, fn)
	if errors.Is(err, kv.ErrNotFound) {
		return rec, rev, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	return rec, rev, err
}

// List reads every session that is not deleted.
func (s *Store) List(ctx context.Context) ([]kv.SessionRecord, error) {
	all, err := s.recs.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]kv.SessionRecord, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if e := all[k]; e.Err == nil && !e.Value.Deleted {
			out = append(out, e.Value)
		}
	}
	return out, nil
}
