// Package session owns sessions' records: one conversation with its
// workspace and agent state, spread over runs and nodes. A record says
// which run of the session may be live (at most one across the cluster),
// its runs in order, the checkpoints it keeps (the last is its head, which
// its next run restores), what it was forked from and which of its
// checkpoint objects forks still use.
//
// Every change is a compare-and-set of the record (kv.Store.Modify), each
// decided by a pure function of the record with a table test:
//   - claim: a run may start when the session has no live run, or when
//     its live run is over (its record says so: the end its holder began
//     is finished here) or never started;
//   - end: the live run ended; its checkpoint, if any, becomes the head
//     and the oldest past Keep are dropped;
//   - borrow and release: a fork uses its source's checkpoint objects
//     without copying them, and the source deletes an object only once
//     no kept checkpoint of its own and no fork uses it.
//
// A record is written only by workers; the head moves only after the
// run's fenced terminal status named the checkpoint (see package
// worker), so a worker that lost the run can never move it.
package session
