package worker

import (
	"errors"
	"time"

	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// The choices a start makes from what it has learnt, kept apart from the
// learning so each has a table test (decide_test.go).

// redelivery is what a start does with a job whose runId has a record.
type redelivery uint8

const (
	// rejectDuplicate: a second job with a taken runId starts nothing
	// (I3); its sender sees why in the DLQ.
	rejectDuplicate redelivery = iota + 1
	// leaveToNode: a redelivery of a run past starting, or whose runner
	// was or is being spawned (the spawning mark): its node's recovery
	// re-attaches it, or respawns it if the runner never took the run
	// (takeOver). The job is acknowledged.
	leaveToNode
	// restartHere: a redelivery of a run whose worker died or stopped
	// before marking it spawning: it is started afresh here.
	restartHere
)

// decideRedelivery chooses for a job delivered for the delivered-th time
// (0 when unknown, taken as the first) whose runId has the record existing;
// sameJob says that the record keeps this very job. A job the record of a
// run still starting keeps is its redelivery whatever the count says: a
// server restarted from a consumer state older than its last deliveries
// delivers again as a first time (a soak's run, its first worker gone
// before its runner started, was rejected as its own duplicate and never
// ran).
func decideRedelivery(existing kv.RunRecord, delivered uint64, sameJob bool) redelivery {
	switch {
	case delivered <= 1 && !(sameJob && existing.State == kv.RunStarting):
		return rejectDuplicate
	case existing.State != kv.RunStarting || existing.Spawning:
		return leaveToNode
	}
	return restartHere
}

// decideArchive is what the outcome of pinning a job's workspace archive
// means for its start, delivered as for decideRedelivery: go on (a
// redelivered job's run may exist, its worker dead while starting it: it
// goes on as any other, and fails when it comes to be seeded), reject a
// missing or oversize archive on a first delivery, before the run exists,
// or nak on any other failure (NATS away).
func decideArchive(err error, delivered uint64) (d consumer.Disposition, goOn bool) {
	switch {
	case err == nil:
		return d, true
	case errors.Is(err, protocol.ErrInvalidJob) || errors.Is(err, protocol.ErrOversize):
		if delivered <= 1 {
			return consumer.Reject(err), false
		}
		return d, true
	}
	return consumer.Nak(time.Second, "pin the workspace archive", err), false
}

// spawnEnd is how a start whose runner did not come up ends.
type spawnEnd uint8

const (
	// spawnLeft: another worker took the run over before its runner
	// started; the job is that worker's now.
	spawnLeft spawnEnd = iota + 1
	// spawnRetry: stopping (or the lease lost) while preparing the
	// sandbox: no runner was spawned and the run directory is gone, so the
	// job's redelivery starts the run afresh (clearUnstarted).
	spawnRetry
	// spawnRecover: stopping (or the lease lost) after the runner was
	// spawned but before it was ready: it may well start, and is the node's
	// recovery's from here (takeOver respawns it if it never takes the run).
	spawnRecover
	// spawnFailed: the run exists and cannot start: it ends failed, once.
	spawnFailed
)

// decideSpawn classifies a start's failure err, with stopping true when the
// start's context had ended (the worker stopping, or the lease lost) and
// marked true when the record was marked spawning.
func decideSpawn(err error, stopping, marked bool) spawnEnd {
	switch {
	case errors.Is(err, errSuperseded):
		return spawnLeft
	case stopping && !marked:
		return spawnRetry
	case stopping:
		return spawnRecover
	}
	return spawnFailed
}
