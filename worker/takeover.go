package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
	"github.com/batonhq/baton/sandbox"
)

// takeOver takes the lease of a run whose runner lives on this node, aligns
// to the last message of its chain, and writes "attached", which fences any
// previous holder. It returns the run to follow, or nil, and the attach
// job's disposition.
func (w *Worker) takeOver(ctx context.Context, aj protocol.AttachJob, log zerolog.Logger) (*run, consumer.Disposition) {
	dir, rec, respawn, d, ok := w.attachable(ctx, aj, log)
	if !ok {
		return nil, d
	}
	l, err := w.live.Acquire(ctx, aj.RunID)
	if errors.Is(err, lease.ErrHeld) {
		// A live holder publishes it; if it dies, the expiry of its
		// liveness key brings the run back here.
		log.Debug().Err(err).Msg("run is held; attach job dropped")
		return nil, consumer.Ack("the run is held")
	}
	if err != nil {
		return nil, consumer.Nak(time.Second, "take lease of an attached run", err)
	}
	r := &run{id: aj.RunID, dir: dir, rec: rec, lease: l,
		log: log.With().Uint64("epoch", l.Epoch()).Logger()}
	finished, err := w.align(ctx, r)
	switch {
	case errors.Is(err, errSuperseded):
		r.log.Warn().Err(err).Msg("another worker holds the run; attach job dropped")
		l.Stop()
		return nil, consumer.Ack("another worker holds the run")
	case err != nil:
		l.Stop()
		return nil, consumer.Nak(time.Second, "align to the run's chain", err)
	case finished:
		return nil, consumer.Ack("the run has ended")
	}
	// The nonce comes from the spec root wrote in the run directory: a
	// record can be written by others, the spec cannot.
	if r.nonce, err = sandbox.ReadNonce(r.dir); err != nil {
		r.log.Error().Err(err).Msg("read the run's nonce")
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: "cannot read the run's spec on node " + w.node + ": " + err.Error()})
		return nil, consumer.Ack("the run's spec is unreadable")
	}
	if respawn && !w.respawn(ctx, r) {
		return nil, consumer.Ack("the runner was not respawned")
	}
	w.markAttached(ctx, r)
	w.metrics.runsAttached.WithLabelValues(aj.Reason).Inc()
	r.log.Info().Int64("offset", r.offset).Msg("run attached")
	return r, consumer.Ack("run attached")
}

// attachable reads what an attach job asks for and reports whether it is
// this worker's to take over (ok), with the run's directory and record and
// whether its runner must be respawned first; d is the job's disposition
// when it is not.
func (w *Worker) attachable(ctx context.Context, aj protocol.AttachJob, log zerolog.Logger) (dir journal.Dir, rec kv.RunRecord, respawn bool, d consumer.Disposition, ok bool) {
	dir, err := runDir(w.stateDir, aj.RunID)
	if err != nil {
		log.Warn().Err(err).Msg("attach job refused")
		return dir, rec, false, consumer.Ack("attach job refused"), false
	}
	rec, _, err = w.runs.Get(ctx, aj.RunID)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		log.Warn().Msg("attach job for a run with no record; dropped")
		return dir, rec, false, consumer.Ack("no record"), false
	case err != nil:
		return dir, rec, false, consumer.Nak(time.Second, "read run record", err), false
	case rec.Node != w.node:
		log.Warn().Str("run_node", rec.Node).Msg("attach job for another node's run; dropped")
		return dir, rec, false, consumer.Ack("another node's run"), false
	case rec.State.Terminal():
		w.markFinished(aj.RunID)
		return dir, rec, false, consumer.Ack("the run has ended"), false
	}
	if w.isActive(aj.RunID) {
		return dir, rec, false, consumer.Ack("the run is held here"), false
	}
	// A starting run whose runner never took it. Before the spawning
	// mark it is its job's: a job is acknowledged only once the run's
	// runner was spawned or the run ended, and its redelivery starts the
	// run afresh (start). After the mark, its starter died or was stopped
	// before the runner took the run, and the job may be gone: the runner
	// is respawned here, once its starter has had the time to spawn it
	// itself (a worker that lost its lease while preparing).
	if rec.State == kv.RunStarting && !runnerTookRun(dir) {
		if !rec.Spawning || preparedLately(dir, w.preparing(), time.Now()) {
			log.Debug().Bool("spawning", rec.Spawning).Msg("run being prepared, its runner not started yet; attach job dropped")
			return dir, rec, false, consumer.Ack("the run is being prepared"), false
		}
		respawn = true
	}
	return dir, rec, respawn, d, true
}

// respawn starts the runner of r, whose starter never saw it take the run,
// again, and reports whether r is to be followed. The caller holds r's
// lease; when r is not to be followed, its end is recorded or the lease
// released here.
func (w *Worker) respawn(ctx context.Context, r *run) bool {
	_, err := sandbox.Respawn(ctx, r.dir, sandbox.WithBinary(w.runner))
	switch {
	case errors.Is(err, sandbox.ErrStartFailed) && runnerTookRun(r.dir):
		// The first runner took the run after all, only late (a loaded
		// node): it is the run's, and followed as any other.
		r.log.Warn().Err(err).Msg("the run's first runner took it while it was respawned; following that one")
	case errors.Is(err, sandbox.ErrStartFailed):
		r.log.Error().Err(err).Msg("respawn the runner")
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: "sandbox did not start: " + err.Error()})
		return false
	case err != nil:
		// Stopping: the runner may start yet; the lease's release brings
		// the run back to the node's recovery.
		r.log.Warn().Err(err).Msg("stopped while respawning the runner")
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.lease.Release(rctx, r.offset, r.chain.LastSeq())
		return false
	default:
		r.log.Warn().Msg("respawned the runner of a run whose starter never saw it take the run")
	}
	return true
}

// markAttached indexes a run taken over by this worker and records it as
// the run's holder (running, if its first worker died before saying so), so
// that the record, `baton runs get`, the console and cancel replies name
// the worker that holds it, not one that is gone.
func (w *Worker) markAttached(ctx context.Context, r *run) {
	// Indexed again on every take-over: a run started by a worker from
	// before the node index gets its entry when an upgraded worker attaches
	// it (a rolling restart hands every run off).
	if err := w.index.add(ctx, w.node, r.id); err != nil {
		r.log.Warn().Err(err).Msg("index run by node")
	}
	if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
		switch {
		case rec.State.Terminal():
			return kv.ErrUnchanged // a write would drop the record's retention TTL
		case rec.Worker == w.id && rec.Node == w.node && rec.State != kv.RunStarting && !rec.Spawning:
			return kv.ErrUnchanged
		}
		// A run still starting has a runner now: a redelivered job must
		// not try to start it again.
		if rec.State == kv.RunStarting {
			rec.State = kv.RunRunning
		}
		rec.Worker, rec.Node, rec.Spawning = w.id, w.node, false
		return nil
	}); err != nil {
		r.log.Warn().Err(err).Msg("record this worker as the run's holder")
	}
}

// runnerTookRun reports whether a runner holds dir's run or ever
// journaled it; an error probing the lock counts as yes, so the run is
// judged as any other.
func runnerTookRun(dir journal.Dir) bool {
	alive, err := sandbox.Alive(dir)
	return err != nil || alive || exists(dir.Journal())
}

// preparing is how long a start may leave a run's directory unchanged
// while it prepares it: a job's redelivery (AckWait) and a lease TTL.
func (w *Worker) preparing() time.Duration { return w.ackWait + w.cfg.LeaseTTL }

// preparedLately reports whether dir changed less than within before now,
// or is gone: its starter may still be about to spawn its runner.
func preparedLately(dir journal.Dir, within time.Duration, now time.Time) bool {
	st, err := os.Lstat(string(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && now.Sub(st.ModTime()) < within
}

// align makes r's chain continue the run's published chain: it reads the
// last message, finishes a line whose chunks were cut short, and publishes
// "attached". finished is true when the chain already ends with a terminal
// status (the run's end is then recorded here).
func (w *Worker) align(ctx context.Context, r *run) (finished bool, err error) {
	for attempt := 0; ; attempt++ {
		// Re-reading the tip and writing on top of it is only ours to do
		// while we hold the run: a holder that lost its lease, or whose
		// chain already carries a later epoch, was superseded (I1).
		select {
		case <-r.lease.Lost():
			return false, fmt.Errorf("%w: %w", errSuperseded, r.lease.Err())
		default:
		}
		pos, err := publisher.Align(ctx, w.js, w.names, r.id)
		if err != nil {
			return false, err
		}
		if pos.Epoch > r.lease.Epoch() {
			return false, fmt.Errorf("%w: the chain's last message is of epoch %d, ours is %d", errSuperseded, pos.Epoch, r.lease.Epoch())
		}
		if pos.Status != nil && pos.Status.Status.Terminal() {
			// The chain ends there: the record names its last message.
			r.chain = w.newChain(r, pos.Seq)
			w.recordTerminal(ctx, r, *pos.Status)
			return true, nil
		}
		r.chain, r.offset = w.newChain(r, pos.Seq), pos.Offset
		if pos.Partial() {
			err := r.resumeLine(ctx, pos)
			if errors.Is(err, publisher.ErrFenced) && attempt < 5 {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("finish chunked line ending at %d: %w", pos.Offset, err)
			}
		}
		if !exists(string(r.dir)) {
			// The node lost the run's directory: nothing can be published.
			w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed,
				Reason: "run directory " + string(r.dir) + " is missing on node " + w.node})
			return true, nil
		}
		err = r.chain.PublishStatus(ctx, w.status(r, protocol.StatusAttached))
		// The previous holder may have published between our read and our
		// write: read again and retry on top of it.
		if errors.Is(err, publisher.ErrFenced) && attempt < 5 {
			continue
		}
		return false, err
	}
}
