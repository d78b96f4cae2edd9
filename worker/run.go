package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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

// errRunnerGone: the runner no longer holds its lock and left no sentinel.
var errRunnerGone = errors.New("runner exited without writing the exit sentinel")

// checkEvery is how often an idle follower checks the lease and the runner.
const checkEvery = 500 * time.Millisecond

// run is one run this worker holds.
type run struct {
	w      *Worker
	id     string
	dir    journal.Dir
	nonce  string
	rec    kv.RunRecord
	lease  *lease.Lease
	chain  *publisher.Chain
	offset int64
	log    zerolog.Logger

	cancelOnce sync.Once
}

// cancel asks the runner to end the agent; the runner writes the sentinel
// with reason "cancel", which ends the run as cancelled.
func (r *run) cancel() {
	r.cancelOnce.Do(func() {
		r.log.Info().Msg("cancel requested")
		if err := sandbox.Cancel(r.dir); err != nil && !errors.Is(err, sandbox.ErrNotRunning) {
			r.log.Warn().Err(err).Msg("cancel run")
		}
	})
}

// dispatch starts the job's run and publishes it until it ends or the
// worker stops.
func (w *Worker) dispatch(ctx context.Context, j consumer.Job) {
	r, err := w.start(ctx, j)
	if err != nil || r == nil {
		return
	}
	w.mu.Lock()
	w.active[r.id] = r
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.active, r.id)
		w.mu.Unlock()
	}()
	// A cancel recorded before the run was registered is not missed.
	if rec, _, err := w.runs.Get(ctx, r.id); err == nil && rec.CancelRequested {
		r.cancel()
	}
	w.follow(ctx, r)
}

// start creates the record and lease, starts the runner, publishes
// "started" and acknowledges the job. It returns nil when the job was
// settled without a run to follow.
func (w *Worker) start(ctx context.Context, j consumer.Job) (*run, error) {
	job, inv, msg := j.Job, j.Invocation, j.Msg
	log := w.log.With().Str("run_id", job.RunID).Logger()
	now := time.Now().UTC()
	rec := kv.RunRecord{
		RunID: job.RunID, State: kv.RunStarting, Node: w.node, Worker: w.id,
		Profile: inv.Profile, Attempt: 1, Nonce: journal.NewNonce(),
		Deadline: now.Add(inv.Timeout), CreatedAt: now, Labels: job.Labels,
	}
	if _, err := w.runs.Create(ctx, job.RunID, rec); err != nil {
		if !errors.Is(err, kv.ErrExists) {
			log.Warn().Err(err).Msg("create run record; job will be redelivered")
			_ = msg.NakWithDelay(time.Second)
			return nil, err
		}
		// I3: an existing record means this runId never starts again. A
		// redelivery is the same job seen before; a first delivery is a
		// second job with a taken runId, which its sender should see.
		existing, _, _ := w.runs.Get(ctx, job.RunID)
		if md, mderr := msg.Metadata(); mderr == nil && md.NumDelivered > 1 {
			log.Info().Str("state", string(existing.State)).Msg("redelivered job of an existing run; nothing to start")
			_ = msg.DoubleAck(ctx)
			return nil, nil
		}
		w.intake.Reject(ctx, msg, fmt.Errorf("%w: run %q already exists (state %s, node %s)",
			protocol.ErrDuplicateRun, job.RunID, existing.State, existing.Node))
		return nil, nil
	}
	l, err := lease.Acquire(ctx, w.leases, job.RunID, lease.Holder{Worker: w.id, Node: w.node}, w.cfg.LeaseTTL,
		lease.WithLogger(log))
	if err != nil {
		// A brand-new run whose lease is held is a leftover of an older
		// run of the same id; the record says it is ours, so retry later.
		log.Warn().Err(err).Msg("take lease of new run; job will be redelivered")
		_ = msg.NakWithDelay(w.cfg.LeaseTTL)
		return nil, err
	}
	l.Start(ctx)
	r := &run{w: w, id: job.RunID, dir: w.runDir(job.RunID), nonce: rec.Nonce, rec: rec, lease: l,
		log: log.With().Uint64("epoch", l.Epoch()).Logger()}
	pos, err := publisher.Align(ctx, w.js, w.names, r.id)
	if err != nil {
		r.log.Warn().Err(err).Msg("align run chain; job will be redelivered")
		l.Stop()
		_ = msg.NakWithDelay(time.Second)
		return nil, err
	}
	r.chain = publisher.NewChain(w.js, w.names, r.id, pos.Seq, publisher.WithEpoch(l.Epoch()), publisher.WithLogger(r.log))

	spec := sandbox.Spec{
		RunID: r.id, RunDir: string(r.dir), Argv: inv.Argv, Env: inv.Env, Files: inv.Files,
		Nonce: rec.Nonce, Deadline: rec.Deadline, KillGrace: 5 * time.Second,
		Network: inv.Network, SandboxUID: w.cfg.SandboxUID, SandboxGID: w.cfg.SandboxUID,
	}
	if _, err := sandbox.Start(ctx, spec, inv.Input, sandbox.WithBinary(w.binary)); err != nil {
		// The run exists and cannot start: it ends failed, once, and the
		// job is settled.
		r.log.Error().Err(err).Msg("start runner")
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: "sandbox did not start: " + err.Error()})
		_ = msg.DoubleAck(ctx)
		return nil, err
	}
	if err := r.chain.PublishStatus(ctx, w.status(r, protocol.StatusStarted)); err != nil {
		// The runner is up and journaling; whoever holds the lease next
		// publishes it. Leave the job for redelivery.
		r.log.Error().Err(err).Msg("publish started")
		l.Stop()
		return nil, err
	}
	if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
		rec.State, rec.StartedAt, rec.Worker = kv.RunRunning, time.Now().UTC(), w.id
		return nil
	}); err != nil {
		r.log.Warn().Err(err).Msg("mark run running")
	}
	if err := msg.DoubleAck(ctx); err != nil {
		r.log.Warn().Err(err).Msg("ack job")
	}
	r.log.Info().Strs("argv", inv.Argv).Msg("run started")
	return r, nil
}

// follow publishes the journal's lines until the sentinel, and finishes the
// run; it returns early, leaving the agent alone, when the lease is lost or
// the worker stops.
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
	publish := func(lines []journal.Line) error { return r.publish(ctx, lines) }
	res, err := journal.Follow(ctx, r.dir.Journal(), r.offset, r.nonce, publish, journal.WithCheck(checkEvery, check))
	switch {
	case res.Sentinel != nil:
		w.finish(ctx, r, sentinelStatus(*res.Sentinel))
	case errors.Is(err, errRunnerGone):
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: errRunnerGone.Error()})
	case ctx.Err() != nil:
		// Shutdown: stop renewing and leave the agent running; the lease
		// expires and the run is picked up again from its chain.
		r.log.Info().Int64("offset", r.offset).Msg("worker stopping; run left to its runner")
		r.lease.Stop()
	default:
		r.log.Warn().Err(err).Int64("offset", r.offset).Msg("stopped publishing run; the agent keeps running")
		r.lease.Stop()
	}
}

// publish puts a batch of journal lines on the run's chain, in order.
func (r *run) publish(ctx context.Context, lines []journal.Line) error {
	for _, l := range lines {
		data := l.Data
		if data == nil {
			var err error
			if data, err = readRange(r.dir.Journal(), l.Start, l.End-1); err != nil {
				return fmt.Errorf("read long line at %d: %w", l.Start, err)
			}
		}
		if err := r.chain.PublishLine(ctx, data, l.End); err != nil {
			return err
		}
		r.offset = l.End
	}
	r.lease.Progress(r.offset, r.chain.LastSeq())
	return nil
}

// finish publishes the terminal status, records it and deletes the lease.
func (w *Worker) finish(ctx context.Context, r *run, st protocol.Status) {
	full := w.status(r, st.Status)
	full.ExitCode, full.Signal, full.Reason = st.ExitCode, st.Signal, st.Reason
	full.StderrTail = journal.StderrTail(r.dir, 2048)
	// The terminal status goes out even while the worker stops: it is one
	// publish and settles the run for good.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.chain.PublishStatus(fctx, full); err != nil {
		r.log.Error().Err(err).Msg("publish terminal status")
		r.lease.Stop()
		return
	}
	if _, _, err := w.runs.Modify(fctx, r.id, func(rec *kv.RunRecord) error {
		rec.State = kv.RunState(full.Status)
		rec.FinishedAt = time.Now().UTC()
		rec.ExitCode, rec.Reason = full.ExitCode, full.Reason
		rec.Offset, rec.LastSeq = r.offset, r.chain.LastSeq()
		return nil
	}); err != nil {
		r.log.Warn().Err(err).Msg("record terminal state")
	}
	if err := r.lease.Delete(fctx); err != nil {
		r.log.Warn().Err(err).Msg("delete lease")
	}
	ev := r.log.Info()
	if full.Status != protocol.StatusSucceeded {
		ev = r.log.Warn()
	}
	ev.Str("status", string(full.Status)).Int64("offset", r.offset).Str("reason", full.Reason).Msg("run finished")
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
	st := protocol.Status{ExitCode: &exit, Signal: s.Signal, Reason: s.Detail}
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

// readRange reads bytes [from, to) of a file.
func readRange(path string, from, to int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, to-from)
	_, err = f.ReadAt(b, from)
	return b, err
}
