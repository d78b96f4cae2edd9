package session

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// Bounds of a record.
const (
	// MaxRuns bounds the runs a record lists (RunCount counts them all).
	MaxRuns = 1000
	// DefaultKeep is how many checkpoints a session keeps: forks may
	// start from any of them.
	DefaultKeep = 10
	// staleClaim is how long a live run may have no record before
	// another run takes its place: its worker claims, then creates the
	// record at once, so one without a record for this long never
	// started (refused as a duplicate, or its worker died between).
	staleClaim = 2 * time.Minute
)

// verdict is what claim decides for a run of a session.
type verdict int

const (
	// start: the run is the session's live run now.
	start verdict = iota
	// wait: another run of the session is live; the job waits.
	wait
	// refuse: the job cannot be a run of this session.
	refuse
	// takeOver: the live run named is over or never started, so the run
	// takes its place (after ending it, when its record says it ended).
	takeOver
)

// claim decides whether run, of profile, may be the live run of the
// session rec (nil: the session has no record yet) at now. live is the
// record of rec.Live when that is another run (nil: it has none).
func claim(rec *kv.SessionRecord, profile, run string, live *kv.RunRecord, now time.Time) (verdict, string) {
	switch {
	case rec == nil:
		return start, ""
	case rec.Deleted:
		return refuse, fmt.Sprintf("session %s was deleted", rec.ID)
	case rec.Profile != profile:
		return refuse, fmt.Sprintf("session %s belongs to profile %q; the job names %q", rec.ID, rec.Profile, profile)
	case rec.Live == "" || rec.Live == run:
		return start, ""
	case live == nil && now.Sub(rec.LiveSince) < staleClaim:
		return wait, fmt.Sprintf("session %s has a live run, %s (starting)", rec.ID, rec.Live)
	case live == nil:
		return takeOver, fmt.Sprintf("its live run %s never started", rec.Live)
	case live.State.Terminal():
		return takeOver, fmt.Sprintf("its live run %s ended (%s)", rec.Live, live.State)
	}
	return wait, fmt.Sprintf("session %s has a live run, %s (%s)", rec.ID, rec.Live, live.State)
}

// begin makes run the live run of rec, and reports whether it added run
// to its runs (a run claimed again is listed once).
func begin(rec *kv.SessionRecord, run string, now time.Time) bool {
	if rec.Live != run {
		rec.LiveSince = now
	}
	rec.Live, rec.State, rec.UpdatedAt = run, kv.SessionActive, now
	if !slices.Contains(rec.Runs, run) {
		rec.Runs = append(rec.Runs, run)
		rec.RunCount++
		if len(rec.Runs) > MaxRuns {
			rec.Runs = slices.Delete(rec.Runs, 0, len(rec.Runs)-MaxRuns)
		}
		return true
	}
	return false
}

// fates are what a change of a record does to checkpoint objects: its own
// objects to delete, and, by owner, the objects of other sessions it no
// longer uses.
type fates struct {
	del     []string
	release map[string][]string
}

func (f *fates) add(g fates) {
	f.del = append(f.del, g.del...)
	for owner, objs := range g.release {
		if f.release == nil {
			f.release = map[string][]string{}
		}
		f.release[owner] = append(f.release[owner], objs...)
	}
}

// objects are the data objects the checkpoints' chains use.
func objects(cps []kv.SessionCheckpoint) map[string]bool {
	set := map[string]bool{}
	for _, c := range cps {
		for _, o := range c.Chain {
			set[o] = true
		}
	}
	return set
}

// unused is the fate of the objects of gone that rec's checkpoints no
// longer use: its own are deleted unless a fork uses them, others'
// released to their owner.
func unused(rec *kv.SessionRecord, gone []kv.SessionCheckpoint) fates {
	kept := objects(rec.Checkpoints)
	var f fates
	for _, o := range slices.Sorted(maps.Keys(objects(gone))) {
		switch owner := checkpoint.SessionOf(o); {
		case kept[o]:
		case owner != rec.ID:
			if f.release == nil {
				f.release = map[string][]string{}
			}
			f.release[owner] = append(f.release[owner], o)
		case len(rec.Lent[o]) == 0:
			f.del = append(f.del, o)
		}
	}
	return f
}

// end records that run, the live run of rec, ended: paused or not, with
// the checkpoint cp its terminal status named (nil: none, cpErr says why
// when it failed). cp becomes the head, numbered after the last, and the
// oldest checkpoints past keep are dropped. It reports false, changing
// nothing, when run is not rec's live run (it ended already, or a worker
// that lost it is late).
func end(rec *kv.SessionRecord, run string, paused bool, cp *kv.SessionCheckpoint, cpErr string, keep int, used *protocol.Usage, now time.Time) (fates, bool) {
	if rec.Live != run || run == "" {
		return fates{}, false
	}
	// Added as Live is cleared, in one write: a successor repeating the
	// end adds nothing.
	if used != nil {
		rec.Usage.Add(*used)
	}
	rec.Live, rec.LiveSince, rec.State, rec.UpdatedAt = "", time.Time{}, kv.SessionIdle, now
	if paused {
		rec.State = kv.SessionPaused
	}
	rec.CheckpointError = cpErr
	if cp == nil {
		return fates{}, true
	}
	return advance(rec, *cp, keep), true
}

// setup makes cp, the checkpoint run's setup made before its agent
// started, rec's head. It reports false, changing nothing, when run is not
// rec's live run (a worker that lost it is late) or cp is its head
// already (a successor storing it again).
func setup(rec *kv.SessionRecord, run string, cp kv.SessionCheckpoint, keep int, now time.Time) (fates, bool) {
	if rec.Live != run || run == "" {
		return fates{}, false
	}
	if h := rec.Head(); h != nil && h.Object == cp.Object {
		return fates{}, false
	}
	cp.Setup, rec.UpdatedAt = true, now
	return advance(rec, cp, keep), true
}

// advance makes cp rec's head, numbered after the last, and drops the
// oldest checkpoints past keep.
func advance(rec *kv.SessionRecord, cp kv.SessionCheckpoint, keep int) fates {
	cp.N = 1
	if h := rec.Head(); h != nil {
		cp.N = h.N + 1
	}
	rec.Checkpoints = append(rec.Checkpoints, cp)
	rec.CheckpointError = ""
	if keep <= 0 {
		keep = DefaultKeep
	}
	if n := len(rec.Checkpoints) - keep; n > 0 {
		gone := slices.Clone(rec.Checkpoints[:n])
		rec.Checkpoints = slices.Delete(rec.Checkpoints, 0, n)
		return unused(rec, gone)
	}
	return fates{}
}

// lost records that run, the live run of rec, was lost with its node: the
// session continues from its head, and says whose work was lost.
func lost(rec *kv.SessionRecord, run string, now time.Time) bool {
	if rec.Live != run || run == "" {
		return false
	}
	rec.Live, rec.LiveSince, rec.State, rec.LostRun, rec.UpdatedAt = "", time.Time{}, kv.SessionIdle, run, now
	return true
}

// borrow records that the session borrower uses objs of owner.
func borrow(owner *kv.SessionRecord, borrower string, objs []string) {
	if owner.Lent == nil {
		owner.Lent = map[string][]string{}
	}
	for _, o := range objs {
		if !slices.Contains(owner.Lent[o], borrower) {
			owner.Lent[o] = append(owner.Lent[o], borrower)
		}
	}
}

// release records that borrower no longer uses objs of owner, and returns
// those of them nothing uses any more: no fork and no checkpoint owner
// keeps.
func release(owner *kv.SessionRecord, borrower string, objs []string) []string {
	kept := objects(owner.Checkpoints)
	var del []string
	for _, o := range objs {
		users := slices.DeleteFunc(owner.Lent[o], func(s string) bool { return s == borrower })
		if len(users) > 0 {
			owner.Lent[o] = users
			continue
		}
		delete(owner.Lent, o)
		if !kept[o] {
			del = append(del, o)
		}
	}
	return del
}

// remove deletes rec: its checkpoints go, their objects deleted or
// released, but those forks still use, which keep rec as a tombstone (it
// reports true) until the last is released.
func remove(rec *kv.SessionRecord, now time.Time) (fates, bool) {
	gone := rec.Checkpoints
	rec.Checkpoints, rec.Live, rec.Deleted, rec.UpdatedAt = nil, "", true, now
	return unused(rec, gone), len(rec.Lent) > 0
}

// fork makes the record of a new session id starting from the checkpoint
// cp of src, and returns, by owner, the objects it borrows.
func fork(src *kv.SessionRecord, cp kv.SessionCheckpoint, id string, labels map[string]string, now time.Time) (*kv.SessionRecord, map[string][]string) {
	from := kv.SessionFork{Session: src.ID, Checkpoint: cp.N}
	cp.N = 0
	lbl := map[string]string{}
	maps.Copy(lbl, src.Labels)
	maps.Copy(lbl, labels)
	if len(lbl) == 0 {
		lbl = nil
	}
	rec := &kv.SessionRecord{
		ID: id, Profile: src.Profile, State: kv.SessionIdle, Checkpoints: []kv.SessionCheckpoint{cp},
		ForkedFrom: &from, Labels: lbl, CreatedAt: now, UpdatedAt: now,
	}
	borrowed := map[string][]string{}
	for _, o := range cp.Chain {
		owner := checkpoint.SessionOf(o)
		borrowed[owner] = append(borrowed[owner], o)
	}
	return rec, borrowed
}

// checkpointOf is the checkpoint n of rec (-1: its head).
func checkpointOf(rec *kv.SessionRecord, n int) (kv.SessionCheckpoint, bool) {
	if n < 0 {
		if h := rec.Head(); h != nil {
			return *h, true
		}
		return kv.SessionCheckpoint{}, false
	}
	for _, c := range rec.Checkpoints {
		if c.N == n {
			return c, true
		}
	}
	return kv.SessionCheckpoint{}, false
}
