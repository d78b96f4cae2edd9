package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
	"github.com/batonhq/baton/sandbox"
)

// errRunnerGone: the runner no longer holds its lock and left no sentinel.
var errRunnerGone = errors.New("runner exited without writing the exit sentinel")

// checkEvery is how often an idle follower checks the lease and the
// runner when its runner cannot be watched through an event (see checkOn).
const checkEvery = 250 * time.Millisecond

// run is one run this worker holds.
type run struct {
	id     string
	dir    journal.Dir
	rec    kv.RunRecord
	nonce  string // ends the journal; from the run directory, never from NATS
	lease  *lease.Lease
	chain  *publisher.Chain
	offset int64 // just past the last line on the chain
	log    zerolog.Logger

	cancelMu    sync.Mutex
	cancelAsked bool // logged
	cancelling  bool // a pursuit of the runner is under way
	cancelSent  bool // the runner is gone since a cancel was asked
	// ended is closed once the run is no longer held here (hold): a
	// cancel's pursuit of the runner ends with it.
	ended chan struct{}
	// onTurn, if set, is told after a turn-end line (waiting) and after
	// an input (running) is on the chain (see turns.go).
	onTurn func(ctx context.Context, waiting bool) error
	// settled, if set, is closed once a start has marked the run's record
	// running and acknowledged its job, which it does beside the follow.
	settled <-chan struct{}
	// runner is the runner this worker spawned for the run, if it did:
	// its exit is known without reading who holds the run's lock.
	runner *sandbox.Runner
	// checkpoint is the checkpoint of a session's run stored at its end
	// (checkpointRun), which its session's head becomes.
	checkpoint *kv.SessionCheckpoint
	// onSetup, while a session's setup is to be checkpointed, is called
	// after the setup wrapper's setupDoneLine is published.
	onSetup func(ctx context.Context, r *run) error
	// pauseAsked: this worker asked for the run's pause (requestPause, on
	// its idle timer), which its record says too.
	pauseAsked atomic.Bool
	// approver, for a run with a policy, records and answers its
	// agent's permission prompts (approvals.go).
	approver *approver
}

// cancel asks the runner to end the agent; the runner writes the sentinel
// with reason "cancel", which ends the run as cancelled. It asks until the
// runner is gone (pursueStop), in the background, while the run is held
// here and ctx lasts; a successor re-reads the record and asks again. A
// pursuit that gave up is logged, counted and left to the next check of
// the run's record (checkCancels).
func (r *run) cancel(ctx context.Context, m *metrics) {
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	if r.cancelSent || r.cancelling {
		return
	}
	r.cancelling = true
	if !r.cancelAsked {
		r.cancelAsked = true
		r.log.Info().Msg("cancel requested")
	}
	go func() {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		if r.ended != nil {
			go func() {
				select {
				case <-r.ended:
					stop()
				case <-ctx.Done():
				}
			}()
		}
		sent, err := pursueStop(ctx, r.dir, sandbox.Cancel, sandbox.Alive, stopPursuit)
		r.cancelMu.Lock()
		defer r.cancelMu.Unlock()
		r.cancelling = false
		switch {
		case err == nil:
			r.cancelSent = true
		case errors.Is(err, errStopAbandoned):
			m.stopsAbandoned.WithLabelValues("cancel").Inc()
			r.log.Error().Err(err).Int("signals", sent).Msg("gave up cancelling the run; the next check of its record asks again")
		}
	}()
}

// dispatch starts a new run and follows it until it ends or is handed off.
// The job's disposition is applied here and nowhere else: at once when the
// start ends without a run, beside the run's first lines when it starts.
func (w *Worker) dispatch(ctx context.Context, j consumer.Job) {
	defer w.unadmit(j.Job.RunID)
	log := w.log.With().Str("run_id", j.Job.RunID).Logger()
	r, d := w.start(ctx, j, log)
	settle := func() { w.intake.Settle(ctx, j.Msg, d, log) }
	if r == nil {
		settle()
		return
	}
	r.settled = w.markRunning(ctx, r, settle)
	w.hold(ctx, r)
}

// dispatchAttach takes over a run of this node and follows it.
func (w *Worker) dispatchAttach(ctx context.Context, msg jetstream.Msg) {
	aj, err := protocol.DecodeAttachJob(msg.Data())
	if err != nil {
		w.intake.Settle(ctx, msg, consumer.Reject(err), w.log)
		return
	}
	log := w.log.With().Str("run_id", aj.RunID).Str("attach", aj.Reason).Logger()
	r, d := w.takeOver(ctx, aj, log)
	w.intake.Settle(ctx, msg, d, log)
	if r != nil {
		w.hold(ctx, r)
	}
}

// hold registers r as active, follows it, and unregisters it.
func (w *Worker) hold(ctx context.Context, r *run) {
	r.ended = make(chan struct{})
	w.mu.Lock()
	w.active[r.id] = r
	w.mu.Unlock()
	defer func() {
		if r.settled != nil {
			<-r.settled
		}
		w.mu.Lock()
		delete(w.active, r.id)
		w.mu.Unlock()
		close(r.ended)
	}()
	// A cancel recorded before the run was registered is not missed; the
	// follow does not wait for the record's read.
	go w.checkCancel(ctx, r)
	stopInput := w.startInput(ctx, r)
	defer stopInput()
	defer w.startTools(ctx, r)()
	defer w.startApprovals(ctx, r)()
	defer w.trackTurns(ctx, r)()
	if err := w.resumeSetup(ctx, r); err != nil {
		r.log.Warn().Err(err).Msg("the session's setup; its wrapper waits at most " + setupWait.String() + " for a checkpoint")
	}
	w.follow(ctx, r)
}

func (w *Worker) newChain(r *run, lastSeq uint64) *publisher.Chain {
	return publisher.NewChain(w.js, w.names, r.id, lastSeq, publisher.WithEpoch(r.lease.Epoch()), publisher.WithLogger(r.log),
		publisher.WithFastBatches(w.fastBatches),
		publisher.WithOnStorageFull(func(full bool) {
			if full {
				w.metrics.storageWaiting.Inc()
				w.metrics.storageStalls.Inc()
			} else {
				w.metrics.storageWaiting.Dec()
			}
		}))
}

// follow publishes the journal's lines until the sentinel, then finishes the
// run. It returns early, leaving the agent alone, when the lease is lost, or
// hands the run off when the worker stops.
func (w *Worker) follow(ctx context.Context, r *run) {
	check := func() error {
		select {
		case <-r.lease.Lost():
			return r.lease.Err()
		default:
		}
		alive, err := sandbox.Alive(r.dir)
		if err != nil {
			return err
		}
		if !alive {
			return errRunnerGone
		}
		return nil
	}
	// A publish in flight when the worker stops is finished, not cut:
	// cutting it would leave its outcome unknown and spoil the hand-off.
	pubCtx, cancelPub := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPub()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(w.grace, cancelPub)
		context.AfterFunc(pubCtx, func() { t.Stop() })
	})
	defer stop()
	publish := func(lines []follow.Line) error {
		// A lost lease stops publishing at once, not at the next idle check.
		select {
		case <-r.lease.Lost():
			return r.lease.Err()
		default:
		}
		if err := r.publish(pubCtx, lines); err != nil {
			return err
		}
		w.metrics.linesOut.Add(float64(len(lines)))
		for _, l := range lines {
			w.metrics.bytesOut.Add(float64(l.End - l.Start))
		}
		return nil
	}
	// Up to a whole atomic batch of lines per call: a backlog goes out in
	// the fewest fenced batches, each of which waits for its ack.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	opts := []follow.Option{follow.WithBatch(publisher.DefaultBatchMessages), w.checkOn(watchCtx, r, check)}
	res, err := follow.Follow(ctx, r.dir.Journal(), r.offset, r.nonce, publish, opts...)
	switch {
	case res.Sentinel != nil:
		st := pausedStatus(r.rec, r.pauseAsked.Load(), sentinelStatus(*res.Sentinel))
		if st.Status == protocol.StatusPaused {
			w.awaitRunnerGone(r)
		}
		w.finish(ctx, r, st)
		if st.Status == protocol.StatusPaused && r.approver != nil {
			r.approver.followUpPaused(context.WithoutCancel(ctx))
		}
	case errors.Is(err, errRunnerGone):
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: errRunnerGone.Error()})
	case ctx.Err() != nil && pubCtx.Err() == nil:
		w.handoff(r)
	default:
		r.log.Warn().Err(err).Int64("offset", r.offset).Msg("stopped publishing run; the agent keeps running")
		r.lease.Stop()
		w.metrics.runsDropped.WithLabelValues(dropCause(err)).Inc()
	}
}

// checkOn is how r's follower learns what its journal cannot say: an
// event, not a poll. The runner's exit (its pidfd, sandbox.WatchRunner)
// or the loss of r's lease (its worker's liveness lapsed) wakes the follower,
// which then runs check; an idle run costs no periodic work. A runner that
// cannot be watched (no pid file yet) is probed every checkEvery instead.
// The watch ends with ctx.
func (w *Worker) checkOn(ctx context.Context, r *run, check func() error) follow.Option {
	var exited <-chan struct{}
	var err error
	if r.runner != nil {
		// This worker's child: its exit is the lock's release. No read of
		// /proc/locks, which waits for an RCU grace period (5-10 ms
		// here) that a prestarted run's first line would wait behind.
		exited = r.runner.Exited()
	} else {
		exited, err = sandbox.WatchRunner(ctx, r.dir)
	}
	if err != nil {
		r.log.Warn().Err(err).Dur("every", checkEvery).Msg("cannot watch the runner; probing it instead")
		return follow.WithCheck(checkEvery, check)
	}
	event := make(chan struct{})
	go func() {
		select {
		case <-exited:
		case <-r.lease.Lost():
		case <-ctx.Done():
			return
		}
		close(event)
	}()
	return follow.WithCheckOn(event, check)
}

// publish puts a batch of journal lines on the run's chain, in order: the
// lines the follower handed over with their bytes in atomic batches, and a
// line longer than its max line alone, read from the journal. r.offset
// moves past a line only once the chain holds it.
func (r *run) publish(ctx context.Context, lines []follow.Line) error {
	for len(lines) > 0 {
		n := 0
		turnEnd, setupDone := false, false
		for n < len(lines) && lines[n].Data != nil && !r.isRecord(lines[n]) && !r.isTool(lines[n]) && !r.isPrompt(lines[n]) && !turnEnd && !setupDone {
			turnEnd = r.isTurnEnd(lines[n])
			setupDone = r.onSetup != nil && string(lines[n].Data) == setupDoneLine
			n++
		}
		if n == 0 && lines[0].Data != nil && r.isTool(lines[0]) {
			// The runner's record of a host tool call or of its answer.
			if err := r.publishTool(ctx, lines[0]); err != nil {
				return err
			}
			r.offset, lines = lines[0].End, lines[1:]
			continue
		}
		if n == 0 && r.isPrompt(lines[0]) {
			// A permission prompt: recorded, and decided if the policy
			// can, before it is on the chain.
			if err := r.approver.publishPrompt(ctx, lines[0]); err != nil {
				return err
			}
			r.offset, lines = lines[0].End, lines[1:]
			r.approver.settle(ctx)
			continue
		}
		if n == 0 && lines[0].Data != nil {
			if rec, ok := r.egressRecord(lines[0]); ok {
				// The runner's record of a connection its egress proxy
				// decided.
				if err := r.chain.PublishEgress(ctx, rec, lines[0].End); err != nil {
					return err
				}
				r.offset, lines = lines[0].End, lines[1:]
				continue
			}
			// The runner's record of an input it wrote to stdin.
			if err := r.publishInput(ctx, lines[0]); err != nil {
				return err
			}
			in := lines[0]
			r.offset, lines = lines[0].End, lines[1:]
			if r.approver != nil {
				r.approver.inputPublished(ctx, in)
			}
			if err := r.turn(ctx, false); err != nil {
				return err
			}
			continue
		}
		if n > 0 {
			if err := r.chain.PublishLines(ctx, lines[:n]); err != nil {
				return err
			}
			r.offset, lines = lines[n-1].End, lines[n:]
			if setupDone {
				if err := r.onSetup(ctx, r); err != nil {
					return err
				}
			}
			if turnEnd {
				if err := r.turn(ctx, true); err != nil {
					return err
				}
			}
			continue
		}
		// Longer than the follower's max line: read from the journal a
		// chunk at a time, never whole.
		l := lines[0]
		f, err := r.dir.Open(journal.JournalName, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("read long line at %d: %w", l.Start, err)
		}
		err = r.chain.PublishLineAt(ctx, f, l.Start, l.End)
		f.Close()
		if err != nil {
			return err
		}
		r.offset, lines = l.End, lines[1:]
	}
	return nil
}

// resumeLine finishes the chunked line the chain's last message, pos, is
// a chunk of, reading it from the journal a chunk at a time.
func (r *run) resumeLine(ctx context.Context, pos publisher.Position) error {
	f, err := r.dir.Open(journal.JournalName, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	start, err := lineStart(f, pos.Offset)
	if err != nil {
		return err
	}
	return r.chain.ResumeLineAt(ctx, f, start, pos)
}

// handoff gives a run up while the worker stops: it publishes "handoff",
// releases the lease with the position reached, and asks the node's other
// workers to attach. "handoff" goes first, while the lease is still ours, so
// the successor's "attached" always follows it on the chain.
func (w *Worker) handoff(r *run) {
	ctx, cancel := context.WithTimeout(context.Background(), w.grace)
	defer cancel()
	if err := r.chain.PublishStatus(ctx, w.status(r, protocol.StatusHandoff)); err != nil {
		r.log.Warn().Err(err).Msg("publish handoff; the lease is released later instead")
		r.lease.Stop()
		return
	}
	if err := r.lease.Release(ctx, r.offset, r.chain.LastSeq()); err != nil {
		r.log.Warn().Err(err).Msg("release lease")
		return
	}
	if err := w.requestAttach(ctx, r.id, protocol.AttachHandoff, fmt.Sprintf("attach:%s:handoff:%d", r.id, r.lease.Epoch())); err != nil {
		r.log.Warn().Err(err).Msg("publish attach job; the node's recovery scan will re-attach the run")
		return
	}
	w.metrics.runsHandedOff.Inc()
	r.log.Info().Int64("offset", r.offset).Msg("run handed off")
}

// requestAttach publishes an attach job for a run of this node.
func (w *Worker) requestAttach(ctx context.Context, runID, reason, msgID string) error {
	msg := nats.NewMsg(w.names.AttachJobSubject(w.node))
	msg.Data = protocol.AttachJob{RunID: runID, Reason: reason}.Encode()
	msg.Header.Set(nats.MsgIdHdr, msgID)
	_, err := w.js.PublishMsg(ctx, msg)
	return err
}

// finish publishes the terminal status, records it and deletes the lease.
func (w *Worker) finish(ctx context.Context, r *run, st protocol.Status) {
	full := w.status(r, st.Status)
	full.ExitCode, full.Signal, full.Reason, full.RetriedAs = st.ExitCode, st.Signal, st.Reason, st.RetriedAs
	full.StderrTail = journal.StderrTail(r.dir, 2048)
	// I9: the outputs are stored before the status that lists them, and
	// a session's checkpoint before the status that names it.
	if full.Status != protocol.StatusLost && !w.captureOutputs(ctx, r, &full) {
		return
	}
	if r.rec.Session != "" && !w.checkpointRun(ctx, r, &full) {
		return
	}
	if full.Status != protocol.StatusLost {
		full.Usage = r.usage(full, st.Usage)
	}
	// The terminal status goes out even while the worker stops: it is one
	// publish and settles the run for good.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.grace)
	defer cancel()
	if err := r.chain.PublishStatus(fctx, full); err != nil {
		r.log.Error().Err(err).Msg("publish terminal status")
		r.lease.Stop()
		return
	}
	if w.testBeforeRecordTerminal != nil {
		w.testBeforeRecordTerminal(r.id)
	}
	w.recordTerminal(fctx, r, full)
	w.metrics.runsFinished.WithLabelValues(string(full.Status)).Inc()
	w.metrics.usage.observe(r.rec.Profile, keyLabel(w.Tenancy(), r.rec.Key), full.Usage)
	ev := r.log.Info()
	if full.Status != protocol.StatusSucceeded {
		ev = r.log.Warn()
	}
	ev.Str("status", string(full.Status)).Int64("offset", r.offset).Str("reason", full.Reason).Msg("run finished")
}

// recordTerminal records a run whose terminal status is on its chain, marks its
// directory finished and deletes its lease and its node index entry. Any
// holder may repeat it. The terminal record expires after the record
// retention; nothing writes a record once it is terminal, since a write
// without the TTL would keep it forever.
//
// A record that cannot be written (the server away past the retries,
// which last at most the grace) leaves the run as it is, its directory
// unfinished and its index entry kept, and gives the lease up: one TTL
// later it is released, and the node's recovery has a worker attach the
// run, find the status on the chain and record it (align). Marked
// finished, the run would have stayed running for good.
func (w *Worker) recordTerminal(ctx context.Context, r *run, st protocol.Status) {
	// The record keeps the checkpoint the session's head becomes.
	w.resolveCheckpoint(ctx, r, st)
	node := r.rec.Node
	rec, err := w.writeTerminal(ctx, r, st)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		// No record to settle (nothing recovers a run without one).
		r.log.Warn().Err(err).Msg("record terminal state")
	case err != nil:
		r.log.Error().Err(err).Msg("record terminal state; the run is left for a successor to record")
		r.lease.Stop()
		return
	default:
		node = rec.Node
	}
	w.endSession(ctx, r, st)
	if w.slots != nil {
		w.slots.ReleaseRun(ctx, r.id)
	}
	w.index.remove(ctx, node, r.id)
	w.markFinished(r.id)
	if err := r.lease.Delete(ctx); err != nil {
		r.log.Warn().Err(err).Msg("delete lease")
	}
}

// writeTerminal writes r's terminal record, trying again every
// recordRetry while the failure is the server's (w.transient), until ctx
// ends and for at most the grace (one try's time with no grace).
func (w *Worker) writeTerminal(ctx context.Context, r *run, st protocol.Status) (kv.RunRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, max(w.grace, recordAttempt))
	defer cancel()
	for try := 0; ; try++ {
		actx, cancelTry := context.WithTimeout(ctx, recordAttempt)
		rec, _, err := w.runs.ModifyTTL(actx, w.js, r.id, w.cfg.RecordTTL(), func(rec *kv.RunRecord) error {
			if rec.State.Terminal() {
				return kv.ErrUnchanged
			}
			rec.State = kv.RunState(st.Status)
			rec.FinishedAt = time.Now().UTC()
			rec.ExitCode, rec.Reason = st.ExitCode, st.Reason
			rec.Offset, rec.Spawning = st.Offset, false
			if r.chain != nil {
				rec.LastSeq = r.chain.LastSeq()
			}
			rec.Checkpoint = r.checkpoint
			rec.Usage = st.Usage
			return nil
		})
		cancelTry()
		if err == nil || !w.transient(err) {
			return rec, err
		}
		if try == 0 {
			r.log.Warn().Err(err).Msg("record terminal state; retrying")
		}
		if !clock.Sleep(ctx, recordRetry) {
			return rec, err
		}
	}
}

// recordAttempt bounds one try of a terminal record's write, and
// recordRetry spaces the tries.
const (
	recordAttempt = 2 * time.Second
	recordRetry   = 250 * time.Millisecond
)

// markFinished leaves a marker that recovery scans skip, never through a
// link, and gives the run's workspace image back (discardWorkspace): the
// run's terminal status is on its chain, after its outputs (I9).
func (w *Worker) markFinished(runID string) {
	dir, err := runDir(w.stateDir, runID)
	if err != nil {
		w.log.Warn().Err(err).Msg("mark run finished")
		return
	}
	if !exists(string(dir)) {
		return
	}
	f, err := dir.Open(journal.FinishedName, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		w.log.Warn().Err(err).Str("run_id", runID).Msg("mark run finished")
		return
	}
	_ = f.Close()
	discardWorkspace(dir, w.log)
}

// status is a status message of r at its current position.
func (w *Worker) status(r *run, s protocol.StatusType) protocol.Status {
	return protocol.Status{
		Status: s, RunID: r.id, Worker: w.id, Node: w.node, Epoch: r.lease.Epoch(),
		Offset: r.offset, Attempt: r.rec.Attempt, Time: time.Now().UTC(),
	}
}

// sentinelStatus maps the journal's exit sentinel to a terminal status.
func sentinelStatus(s journal.Sentinel) protocol.Status {
	exit := s.Exit
	st := protocol.Status{ExitCode: &exit, Signal: s.Signal, Reason: s.Detail, Usage: sentinelUsage(s)}
	switch s.Reason {
	case journal.ReasonTimeout:
		st.Status = protocol.StatusTimeout
	case journal.ReasonCancel:
		st.Status = protocol.StatusCancelled
	case journal.ReasonExit:
		st.Status = protocol.StatusFailed
		if exit == 0 {
			st.Status = protocol.StatusSucceeded
		}
	default:
		st.Status = protocol.StatusFailed
	}
	if st.Reason == "" {
		switch {
		case s.Reason == journal.ReasonSignal:
			st.Reason = "agent killed by signal " + s.Signal
		case s.Reason == journal.ReasonExit && exit != 0:
			st.Reason = fmt.Sprintf("agent exited with code %d", exit)
		case s.Reason != journal.ReasonExit:
			st.Reason = s.Reason
		}
	}
	return st
}

// dropCause names why a run stopped being published, for metrics.
func dropCause(err error) string {
	switch {
	case errors.Is(err, lease.ErrLost):
		return "lease_lost"
	case errors.Is(err, publisher.ErrFenced):
		return "fenced"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "shutdown"
	}
	return "error"
}

// exists reports whether path exists, a symbolic link as itself.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (w *Worker) isActive(runID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active[runID] != nil
}

// beginStart registers a start of runID, or reports false when one is
// under way in this worker; endStart ends it.
func (w *Worker) beginStart(runID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.starting[runID] {
		return false
	}
	w.starting[runID] = true
	return true
}

func (w *Worker) endStart(runID string) {
	w.mu.Lock()
	delete(w.starting, runID)
	w.mu.Unlock()
}
