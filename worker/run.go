package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
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

// maxKeptJob bounds a job kept in its run record for retries, so the record
// stays well under the server's max payload.
const maxKeptJob = 256 << 10

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

// dispatch starts a new run and publishes it until it ends or is handed off.
// errSuperseded: the run record changed under a worker about to spawn the
// run's runner; another worker took the run over.
var errSuperseded = errors.New("run taken over by another worker")

// spawnMarkTimeout bounds one write or read of the spawning mark.
const spawnMarkTimeout = 5 * time.Second

// markSpawning sets the spawning mark on the record of a run that rec (at
// revision rev) says is ours, by compare-and-set, and returns the record
// and revision written. It fails with errSuperseded if another worker took
// the run over meanwhile or the mark cannot be written.
//
// Its outcome must be known: a mark on the record tells the worker a job
// is redelivered to that the runner is this node's (see start), and the
// caller spawns nothing when this fails, removing the run directory, so a
// mark written without a runner loses the run for good. So the writes
// ignore the caller's cancellation (a stopping worker), and a write whose
// reply was lost but which was applied is recognised as ours on re-read.
func markSpawning(ctx context.Context, js jetstream.JetStream, runs *kv.Store[kv.RunRecord], id string, rec kv.RunRecord, rev uint64) (kv.RunRecord, uint64, error) {
	cur := rec
	for attempt := 1; ; attempt++ {
		cur.Spawning = true
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spawnMarkTimeout)
		nrev, err := runs.Update(wctx, id, cur, rev)
		cancel()
		if err == nil {
			return cur, nrev, nil
		}
		// Changed meanwhile (a cancel request, say, or our own write
		// whose reply was lost): still ours unless another worker took
		// the run over or spawned it. Read from the bucket's leader: a
		// lagging replica's older revision would hide our own write
		// (the cluster chaos soak saw a mark that landed taken for
		// another worker's, and the run was lost).
		got, grev, gerr := readMark(ctx, js, runs, id)
		if gerr != nil {
			return kv.RunRecord{}, 0, fmt.Errorf("%w: %w (after %w)", errSuperseded, gerr, err)
		}
		if got.Node != rec.Node || got.Worker != rec.Worker || got.State != kv.RunStarting {
			return kv.RunRecord{}, 0, fmt.Errorf("%w: record now of node %s, worker %s, state %s", errSuperseded, got.Node, got.Worker, got.State)
		}
		if got.Spawning {
			// Only this worker marks a record that names it.
			return got, grev, nil
		}
		if attempt == 3 {
			return kv.RunRecord{}, 0, fmt.Errorf("%w: %w", errSuperseded, err)
		}
		cur, rev = got, grev
	}
}

// readMark reads a run's record from its bucket's leader for markSpawning,
// trying again while NATS does not answer, within three spawnMarkTimeouts.
func readMark(ctx context.Context, js jetstream.JetStream, runs *kv.Store[kv.RunRecord], id string) (kv.RunRecord, uint64, error) {
	end := time.Now().Add(3 * spawnMarkTimeout)
	for {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spawnMarkTimeout)
		got, rev, err := runs.GetFromLeader(gctx, js, id)
		cancel()
		if err == nil || errors.Is(err, kv.ErrNotFound) || time.Now().After(end) {
			return got, rev, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (w *Worker) dispatch(ctx context.Context, j consumer.Job) {
	defer w.unadmit(j.Job.RunID)
	if r := w.start(ctx, j); r != nil {
		w.hold(ctx, r)
	}
}

// dispatchAttach takes over a run of this node and publishes it.
func (w *Worker) dispatchAttach(ctx context.Context, msg jetstream.Msg) {
	aj, err := protocol.DecodeAttachJob(msg.Data())
	if err != nil {
		w.intake.Reject(ctx, msg, err)
		return
	}
	if r := w.takeOver(ctx, aj, msg); r != nil {
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
	defer w.trackTurns(ctx, r)()
	w.follow(ctx, r)
}

// start creates the record and lease of a new run, starts its runner,
// publishes "started" and acknowledges the job. It returns nil when the job
// was settled without a run to follow.
func (w *Worker) start(ctx context.Context, j consumer.Job) *run {
	job, inv, msg := j.Job, j.Invocation, j.Msg
	log := w.log.With().Str("run_id", job.RunID).Logger()
	dir, err := w.runDir(job.RunID)
	if err != nil {
		// Decoding the job checked it already; never a path unchecked.
		w.intake.Reject(ctx, msg, err)
		return nil
	}
	if !w.beginStart(job.RunID) {
		// Redelivered while this worker still starts it (a loaded node
		// past AckWait): that start settles the job.
		log.Debug().Msg("redelivered job of a run this worker is starting; later")
		_ = msg.NakWithDelay(w.cfg.LeaseTTL)
		return nil
	}
	defer w.endStart(job.RunID)
	// A missing or oversize archive is known before the run exists: the
	// job goes to the DLQ with the reason. A redelivered job's run may
	// exist (its worker died while starting it): that run goes on as any
	// other, and fails when it comes to be seeded.
	arch, archErr := w.pinWorkspace(ctx, job)
	if errors.Is(archErr, protocol.ErrInvalidJob) || errors.Is(archErr, protocol.ErrOversize) {
		if md, _ := msg.Metadata(); md == nil || md.NumDelivered == 1 {
			w.intake.Reject(ctx, msg, archErr)
			return nil
		}
	} else if archErr != nil {
		log.Warn().Err(archErr).Msg("job will be redelivered")
		_ = msg.NakWithDelay(time.Second)
		return nil
	}
	now := time.Now().UTC()
	restart := false
	rec := kv.RunRecord{
		RunID: job.RunID, State: kv.RunStarting, Node: w.node, Worker: w.id,
		Profile: inv.Profile, Attempt: 1,
		Deadline: now.Add(inv.Timeout), CreatedAt: now, Labels: job.Labels,
		Interactive: inv.Stdin == config.StdinStream, IdleTimeout: inv.IdleTimeout,
	}
	if inv.TurnEnd != nil {
		rec.TurnEndField, rec.TurnEndEquals = inv.TurnEnd.Field, inv.TurnEnd.Equals
	}
	if n, err := strconv.Atoi(job.Labels[protocol.LabelAttempt]); err == nil && n > 1 {
		rec.Attempt = n
	}
	if job.Retries > 0 {
		// Kept whole so a retry runs exactly the same job; a job too large
		// to keep beside its record is run without retries.
		// Half the server's max payload at most, so the record with its
		// other fields fits one message on a server with a small one.
		if b, err := protocol.EncodeWorkerJob(job); err == nil && len(b) <= min(maxKeptJob, int(w.nc.MaxPayload())/2) {
			rec.Retries, rec.Job = job.Retries, b
		} else {
			log.Warn().Int("bytes", len(b)).Msg("job too large to keep for retries; it will not be retried")
		}
	}
	// Indexed before the record exists, so no run of this node is ever
	// unknown to the node-loss reaper (a stale entry costs nothing: the
	// reaper checks the record).
	if err := w.indexRun(ctx, w.node, job.RunID); err != nil {
		log.Warn().Err(err).Msg("index run by node; job will be redelivered")
		_ = msg.NakWithDelay(time.Second)
		return nil
	}
	recRev, err := w.runs.Create(ctx, job.RunID, rec)
	if err != nil {
		if !errors.Is(err, kv.ErrExists) {
			log.Warn().Err(err).Msg("create run record; job will be redelivered")
			_ = msg.NakWithDelay(time.Second)
			return nil
		}
		existing, rev, gerr := w.runs.Get(ctx, job.RunID)
		if gerr != nil {
			_ = msg.NakWithDelay(time.Second)
			return nil
		}
		if existing.Node != w.node {
			w.unindexRun(ctx, w.node, job.RunID) // another node's run, unless taken over below
		}
		md, _ := msg.Metadata()
		if md == nil || md.NumDelivered == 1 {
			// I3: a second job with a taken runId starts nothing; its
			// sender sees why in the DLQ.
			w.intake.Reject(ctx, msg, fmt.Errorf("%w: run %q already exists (state %s, node %s)",
				protocol.ErrDuplicateRun, job.RunID, existing.State, existing.Node))
			return nil
		}
		// A redelivery of our own job: the worker that took it died or
		// was stopped. A run past starting, or one whose runner was
		// spawned or is being spawned (the spawning mark), is its node's
		// recovery's to re-attach, or to respawn if the runner never
		// took the run (takeOver). One that never got that far is ours to
		// start afresh, here. The record is taken by compare-and-set
		// first: only one worker restarts the run, and its first worker,
		// should it still be preparing, can no longer mark it spawning
		// (markSpawning), so no runner of its starts in the directory
		// cleared here.
		if existing.State != kv.RunStarting || existing.Spawning {
			log.Info().Str("state", string(existing.State)).Str("run_node", existing.Node).Bool("spawning", existing.Spawning).
				Msg("redelivered job of an existing run; its node has it")
			_ = msg.DoubleAck(ctx)
			return nil
		}
		from := existing.Node
		if from != w.node {
			if err := w.indexRun(ctx, w.node, job.RunID); err != nil {
				log.Warn().Err(err).Msg("index run by node; job will be redelivered")
				_ = msg.NakWithDelay(time.Second)
				return nil
			}
		}
		existing.Node, existing.Worker = w.node, w.id
		if rev, err = w.runs.Update(ctx, job.RunID, existing, rev); err != nil {
			log.Warn().Err(err).Msg("take over a run whose worker died before spawning it; job will be redelivered")
			_ = msg.NakWithDelay(time.Second)
			return nil
		}
		if from != w.node {
			w.unindexRun(ctx, from, job.RunID)
			log.Info().Str("from_node", from).Msg("took over a run whose worker died before spawning it")
		}
		rec, recRev, restart = existing, rev, true
	}
	l, err := w.live.Acquire(ctx, job.RunID)
	if err != nil {
		log.Warn().Err(err).Msg("take lease of new run; job will be redelivered")
		_ = msg.NakWithDelay(w.cfg.LeaseTTL)
		return nil
	}
	r := &run{id: job.RunID, dir: dir, rec: rec, lease: l, nonce: journal.NewNonce(),
		log: log.With().Uint64("epoch", l.Epoch()).Logger()}
	if restart && !w.clearUnstarted(r) {
		// The runner did start: release the lease so the node's recovery
		// re-attaches it at once.
		_ = l.Release(ctx, 0, 0)
		_ = msg.DoubleAck(ctx)
		return nil
	}
	pos, err := publisher.Align(ctx, w.js, w.names, r.id)
	if err != nil {
		r.log.Warn().Err(err).Msg("align run chain; job will be redelivered")
		l.Stop()
		_ = msg.NakWithDelay(time.Second)
		return nil
	}
	if pos.Status != nil && pos.Status.Status.Terminal() {
		// The run ended before (a take-over settled it while its record
		// still said starting): it never starts again.
		r.log.Warn().Str("status", string(pos.Status.Status)).Msg("redelivered job of a run whose chain has ended; not started again")
		w.settle(ctx, r, *pos.Status)
		_ = msg.DoubleAck(ctx)
		return nil
	}
	r.chain = w.newChain(r, pos.Seq)

	spec := w.sandboxSpec(r.id, r.dir, inv)
	spec.Nonce, spec.Deadline, spec.Workspace = r.nonce, rec.Deadline, arch
	// A lease lost while preparing (NATS away longer than its TTL) stops
	// the start as the worker stopping does: the run may be another
	// worker's by now.
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	go func() {
		select {
		case <-l.Lost():
			cancelStart()
		case <-startCtx.Done():
		}
	}()
	// The last word before the runner: mark the record spawning, by CAS,
	// or learn that another worker took the run over meanwhile.
	marked := false // the runner is spawned only once the mark is written
	spawning := func() error {
		if w.testBeforeMark != nil {
			w.testBeforeMark(r.id)
		}
		if err := startCtx.Err(); err != nil {
			// The lease was lost (or the worker is stopping) while
			// preparing, which can outlast it on a loaded node: the run
			// may be started by another attempt already, and the mark
			// cannot tell that one from us when it is of this worker.
			return fmt.Errorf("not spawned: the lease was lost or the worker is stopping: %w", err)
		}
		cur, rev, err := markSpawning(ctx, w.js, w.runs, r.id, rec, recRev)
		if err == nil {
			r.rec, recRev, marked = cur, rev, true
		}
		return err
	}
	startOpts := []sandbox.StartOption{sandbox.WithBinary(w.runner), sandbox.WithBeforeSpawn(spawning)}
	if job.Workspace != nil {
		startOpts = append(startOpts, sandbox.WithSeed(w.seedWorkspace(job.Workspace.Object, arch, archErr, msg, r.log)))
	}
	runner, pooled, err := w.startRunner(startCtx, inv.Profile, spec, inv.Input, startOpts...)
	if errors.Is(err, errSuperseded) {
		r.log.Warn().Err(err).Msg("another worker took this run over before its runner started; leaving it")
		_ = l.Release(ctx, 0, 0)
		return nil
	} else if err != nil && startCtx.Err() != nil && !marked {
		// Stopping (or the lease lost) while preparing the sandbox,
		// whatever step it cut short: no runner was spawned and the run
		// directory is gone. The job's redelivery starts the run afresh
		// (clearUnstarted), on this node or another.
		r.log.Warn().Err(err).Msg("stopped while preparing the sandbox; the job will be redelivered")
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = l.Release(rctx, 0, 0)
		// Delayed past this worker's own pull requests (a fetch waits 2 s),
		// which would take the redelivery into the void until AckWait.
		if err := msg.NakWithDelay(3 * time.Second); err != nil {
			r.log.Warn().Err(err).Msg("nak job")
		}
		return nil
	} else if err != nil && startCtx.Err() != nil {
		// Stopping (or the lease lost) while the runner was spawned but
		// not yet ready: it may well start, and is the node's recovery's
		// from here (takeOver respawns it if it never takes the run).
		r.log.Warn().Err(err).Msg("stopped while the runner started; the node's recovery takes the run over")
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = l.Release(rctx, 0, 0)
		_ = msg.DoubleAck(rctx)
		return nil
	} else if err != nil {
		// The run exists and cannot start: it ends failed, once.
		r.log.Error().Err(err).Msg("start runner")
		reason := "sandbox did not start: " + err.Error()
		if ae := (*archiveError)(nil); errors.As(err, &ae) {
			reason = "the workspace was not seeded: " + ae.Error()
		}
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: reason})
		_ = msg.DoubleAck(ctx)
		return nil
	}
	if err := r.chain.PublishStatus(ctx, w.status(r, protocol.StatusStarted)); err != nil {
		// The runner is up and journaling; recovery re-attaches it.
		r.log.Error().Err(err).Msg("publish started")
		l.Stop()
		_ = msg.DoubleAck(ctx)
		return nil
	}
	// The record's "running" and the job's ack go beside the run's first
	// lines, not before them: a prestarted run's agent prints within
	// milliseconds of its take, and the follower starts at once.
	settled := make(chan struct{})
	r.settled = settled
	go func() {
		defer close(settled)
		if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
			if rec.State.Terminal() {
				return kv.ErrUnchanged // a write would drop the record's retention TTL
			}
			rec.State, rec.StartedAt, rec.Worker = kv.RunRunning, time.Now().UTC(), w.id
			return nil
		}); err != nil {
			r.log.Warn().Err(err).Msg("mark run running")
		}
		if err := msg.DoubleAck(ctx); err != nil {
			r.log.Warn().Err(err).Msg("ack job")
		}
	}()
	w.metrics.runsStarted.Inc()
	if pooled {
		w.metrics.runsPrestarted.Inc()
	}
	r.runner = runner
	r.log.Info().Strs("argv", inv.Argv).Bool("prestarted", pooled).Msg("run started")
	return r
}

// sandboxSpec is the spec of run id in dir for inv, without what is the
// start's own (nonce, deadline, workspace archive).
func (w *Worker) sandboxSpec(id string, dir journal.Dir, inv config.Invocation) sandbox.Spec {
	return sandbox.Spec{
		RunID: id, RunDir: string(dir), Argv: inv.Argv, Baton: w.binary, Env: inv.Env, Files: inv.Files,
		KillGrace: 5 * time.Second,
		Network:   inv.Network, SandboxUID: w.cfg.SandboxUID, SandboxGID: w.cfg.SandboxUID,
		Mounts: inv.Mounts, Limits: inv.Limits, AgentUID: inv.AgentUID, AgentGID: inv.AgentGID, Stdin: inv.Stdin, InterruptLine: inv.Interrupt.Line,
		Nice: inv.Nice, CgroupParent: w.cfg.CgroupParent, Outputs: inv.Outputs,
	}
}

// clearUnstarted removes what a worker that died while starting r left
// behind, and reports whether r can be started afresh: only when no runner
// ever journaled it. The caller holds r's lease.
func (w *Worker) clearUnstarted(r *run) bool {
	if alive, err := sandbox.Alive(r.dir); err != nil || alive || exists(r.dir.Journal()) {
		return false
	}
	if err := sandbox.ReleaseWorkspace(r.dir); err != nil {
		r.log.Warn().Err(err).Msg("remove unstarted run directory")
		return false
	}
	if err := os.RemoveAll(string(r.dir)); err != nil {
		r.log.Warn().Err(err).Msg("remove unstarted run directory")
		return false
	}
	r.log.Info().Msg("starting a run whose first worker died before its runner started")
	return true
}

// runnerTookRun reports whether a runner holds dir's run or ever
// journaled it; an error probing the lock counts as yes, so the run is
// judged as any other.
func runnerTookRun(dir journal.Dir) bool {
	alive, err := sandbox.Alive(dir)
	return err != nil || alive || exists(dir.Journal())
}

// preparedLately reports whether dir changed less than a job's redelivery
// ago, or is gone: its starter may still be about to spawn its runner.
func (w *Worker) preparedLately(dir journal.Dir) bool {
	st, err := os.Lstat(string(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && time.Since(st.ModTime()) < w.ackWait+w.cfg.LeaseTTL
}

// takeOver takes the lease of a run whose runner lives on this node, aligns
// to the last message of its chain, and writes "attached", which fences any
// previous holder. It settles the attach job and returns the run to follow,
// or nil.
func (w *Worker) takeOver(ctx context.Context, aj protocol.AttachJob, msg jetstream.Msg) *run {
	log := w.log.With().Str("run_id", aj.RunID).Str("attach", aj.Reason).Logger()
	done := func() { _ = msg.DoubleAck(ctx) }
	dir, err := w.runDir(aj.RunID)
	if err != nil {
		log.Warn().Err(err).Msg("attach job refused")
		done()
		return nil
	}
	rec, _, err := w.runs.Get(ctx, aj.RunID)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		log.Warn().Msg("attach job for a run with no record; dropped")
		done()
		return nil
	case err != nil:
		log.Warn().Err(err).Msg("read run record; attach job will be redelivered")
		_ = msg.NakWithDelay(time.Second)
		return nil
	case rec.Node != w.node:
		log.Warn().Str("run_node", rec.Node).Msg("attach job for another node's run; dropped")
		done()
		return nil
	case rec.State.Terminal():
		w.markFinished(aj.RunID)
		done()
		return nil
	}
	if w.isActive(aj.RunID) {
		done()
		return nil
	}
	// A starting run whose runner never took it. Before the spawning
	// mark it is its job's: a job is acknowledged only once the run's
	// runner was spawned or the run settled, and its redelivery starts
	// the run afresh (start). After the mark, its starter died or was
	// stopped before the runner took the run, and the job may be gone:
	// the runner is respawned here, once its starter has had the time to
	// spawn it itself (a worker that lost its lease while preparing).
	respawn := false
	if rec.State == kv.RunStarting && !runnerTookRun(dir) {
		if !rec.Spawning || w.preparedLately(dir) {
			log.Debug().Bool("spawning", rec.Spawning).Msg("run being prepared, its runner not started yet; attach job dropped")
			done()
			return nil
		}
		respawn = true
	}
	l, err := w.live.Acquire(ctx, aj.RunID)
	if errors.Is(err, lease.ErrHeld) {
		// A live holder publishes it; if it dies, the expiry of its
		// liveness key brings the run back here.
		log.Debug().Err(err).Msg("run is held; attach job dropped")
		done()
		return nil
	}
	if err != nil {
		log.Warn().Err(err).Msg("take lease; attach job will be redelivered")
		_ = msg.NakWithDelay(time.Second)
		return nil
	}
	r := &run{id: aj.RunID, dir: dir, rec: rec, lease: l,
		log: log.With().Uint64("epoch", l.Epoch()).Logger()}
	finished, err := w.align(ctx, r)
	switch {
	case errors.Is(err, errSuperseded):
		r.log.Warn().Err(err).Msg("another worker holds the run; attach job dropped")
		l.Stop()
		done()
		return nil
	case err != nil:
		r.log.Warn().Err(err).Msg("align to the run's chain; attach job will be redelivered")
		l.Stop()
		_ = msg.NakWithDelay(time.Second)
		return nil
	case finished:
		done()
		return nil
	}
	// The nonce comes from the spec root wrote in the run directory: a
	// record can be written by others, the spec cannot.
	if r.nonce, err = sandbox.ReadNonce(r.dir); err != nil {
		r.log.Error().Err(err).Msg("read the run's nonce")
		w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: "cannot read the run's spec on node " + w.node + ": " + err.Error()})
		done()
		return nil
	}
	if respawn {
		if _, err := sandbox.Respawn(ctx, r.dir, sandbox.WithBinary(w.runner)); errors.Is(err, sandbox.ErrStartFailed) && runnerTookRun(r.dir) {
			// The first runner took the run after all, only late (a
			// loaded node): it is the run's, and followed as any other.
			r.log.Warn().Err(err).Msg("the run's first runner took it while it was respawned; following that one")
		} else if errors.Is(err, sandbox.ErrStartFailed) {
			r.log.Error().Err(err).Msg("respawn the runner")
			w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: "sandbox did not start: " + err.Error()})
			done()
			return nil
		} else if err != nil {
			// Stopping: the runner may start yet; the lease's release
			// brings the run back to the node's recovery.
			r.log.Warn().Err(err).Msg("stopped while respawning the runner")
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = l.Release(rctx, r.offset, r.chain.LastSeq())
			done()
			return nil
		} else {
			r.log.Warn().Msg("respawned the runner of a run whose starter never saw it take the run")
		}
	}
	// Indexed again on every take-over: a run started by a worker from
	// before the node index gets its entry when an upgraded worker attaches
	// it (a rolling restart hands every run off).
	if err := w.indexRun(ctx, w.node, r.id); err != nil {
		r.log.Warn().Err(err).Msg("index run by node")
	}
	if rec.State == kv.RunStarting {
		// Its first worker died before recording the start; the runner
		// is up, so a redelivered job must not try to start it again.
		if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
			if rec.State != kv.RunStarting {
				return kv.ErrUnchanged
			}
			rec.State = kv.RunRunning
			return nil
		}); err != nil {
			r.log.Warn().Err(err).Msg("mark run running")
		}
	}
	done()
	w.metrics.runsAttached.WithLabelValues(aj.Reason).Inc()
	r.log.Info().Int64("offset", r.offset).Msg("run attached")
	return r
}

// align makes r's chain continue the run's published chain: it reads the
// last message, finishes a line whose chunks were cut short, and publishes
// "attached". finished is true when the chain already ends with a terminal
// status (the run is then settled here).
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
			w.settle(ctx, r, *pos.Status)
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

func (w *Worker) newChain(r *run, lastSeq uint64) *publisher.Chain {
	return publisher.NewChain(w.js, w.names, r.id, lastSeq, publisher.WithEpoch(r.lease.Epoch()), publisher.WithLogger(r.log),
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
		w.finish(ctx, r, sentinelStatus(*res.Sentinel))
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
		turnEnd := false
		for n < len(lines) && lines[n].Data != nil && !r.isInput(lines[n]) && !turnEnd {
			turnEnd = r.isTurnEnd(lines[n])
			n++
		}
		if n == 0 && lines[0].Data != nil {
			// The runner's record of an input it wrote to stdin.
			if err := r.publishInput(ctx, lines[0]); err != nil {
				return err
			}
			r.offset, lines = lines[0].End, lines[1:]
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
	full.ExitCode, full.Signal, full.Reason = st.ExitCode, st.Signal, st.Reason
	full.StderrTail = journal.StderrTail(r.dir, 2048)
	// I9: the outputs are stored before the status that lists them.
	if full.Status != protocol.StatusLost && !w.captureOutputs(ctx, r, &full) {
		return
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
	w.settle(fctx, r, full)
	w.metrics.runsFinished.WithLabelValues(string(full.Status)).Inc()
	ev := r.log.Info()
	if full.Status != protocol.StatusSucceeded {
		ev = r.log.Warn()
	}
	ev.Str("status", string(full.Status)).Int64("offset", r.offset).Str("reason", full.Reason).Msg("run finished")
}

// settle records a run whose terminal status is on its chain, marks its
// directory finished and deletes its lease and its node index entry. Any
// holder may repeat it. The terminal record expires after the record
// retention; nothing writes a record once it is terminal, since a write
// without the TTL would keep it forever.
func (w *Worker) settle(ctx context.Context, r *run, st protocol.Status) {
	node := r.rec.Node
	if rec, _, err := w.runs.ModifyTTL(ctx, w.js, r.id, w.cfg.RecordTTL(), func(rec *kv.RunRecord) error {
		if rec.State.Terminal() {
			return kv.ErrUnchanged
		}
		rec.State = kv.RunState(st.Status)
		rec.FinishedAt = time.Now().UTC()
		rec.ExitCode, rec.Reason = st.ExitCode, st.Reason
		rec.Offset = st.Offset
		if r.chain != nil {
			rec.LastSeq = r.chain.LastSeq()
		}
		return nil
	}); err != nil {
		r.log.Warn().Err(err).Msg("record terminal state")
	} else {
		node = rec.Node
	}
	w.unindexRun(ctx, node, r.id)
	w.markFinished(r.id)
	if err := r.lease.Delete(ctx); err != nil {
		r.log.Warn().Err(err).Msg("delete lease")
	}
}

// markFinished leaves a marker that recovery scans skip, never through a
// link, and gives the run's workspace image back (discardWorkspace): the
// run's terminal status is on its chain, after its outputs (I9).
func (w *Worker) markFinished(runID string) {
	dir, err := w.runDir(runID)
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
	w.discardWorkspace(dir)
}

// discardWorkspace unmounts a finished run's bounded workspace, which
// frees its loop device, and removes its image: a mount kept for the run
// retention slows every later sandbox start (each new mount namespace
// copies the table), and the image holds up to limits.disk of the state
// filesystem. Never while a runner holds the run.
func (w *Worker) discardWorkspace(dir journal.Dir) {
	if !exists(filepath.Join(string(dir), sandbox.WorkspaceImageName)) {
		return // unbounded (a non-root worker's), or given back already
	}
	// The runner ends just after the sentinel it wrote, which is what
	// ended the run.
	for end := time.Now().Add(discardWait); ; time.Sleep(20 * time.Millisecond) {
		alive, err := sandbox.Alive(dir)
		if err == nil && !alive {
			break
		}
		if time.Now().After(end) {
			w.log.Warn().Err(err).Str("run_dir", string(dir)).Msgf("a finished run's runner still holds it after %v: its workspace stays until the next worker start or the prune", discardWait)
			return
		}
	}
	if err := sandbox.DiscardWorkspace(dir); err != nil {
		w.log.Warn().Err(err).Str("run_dir", string(dir)).Msg("give back a finished run's workspace; the prune does it later")
	}
}

// discardWait bounds the wait for a finished run's runner to exit.
const discardWait = 5 * time.Second

// discardFinishedWorkspaces gives back the workspaces of the finished runs
// of the state directory that still have theirs: a predecessor killed
// between a run's end and its discard, or one from before discards.
func (w *Worker) discardFinishedWorkspaces() {
	runs := filepath.Join(w.stateDir, "runs")
	entries, err := os.ReadDir(runs)
	if err != nil {
		w.log.Warn().Err(err).Msg("give back finished runs' workspaces")
		return
	}
	n := 0
	for _, e := range entries {
		dir := journal.Dir(filepath.Join(runs, e.Name()))
		if !e.IsDir() || !exists(dir.Finished()) || !exists(filepath.Join(string(dir), sandbox.WorkspaceImageName)) {
			continue
		}
		w.discardWorkspace(dir)
		n++
	}
	if n > 0 {
		w.log.Info().Int("runs", n).Msg("gave back finished runs' workspaces left mounted")
	}
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
