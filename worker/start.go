package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
	"github.com/batonhq/baton/session"
)

// errSuperseded: the run record changed under a worker about to spawn the
// run's runner; another worker took the run over.
var errSuperseded = errors.New("run taken over by another worker")

// spawnMarkTimeout bounds one write or read of the spawning mark.
const spawnMarkTimeout = 5 * time.Second

// leaseEnd is what a start that ends without a run does with the lease it
// took.
type leaseEnd uint8

const (
	// leaseKept: nothing to do (none taken, the run's end was recorded,
	// which deleted it, or the run goes on).
	leaseKept leaseEnd = iota
	// leaseRelease: given back at once, so the node's recovery re-attaches
	// the run without waiting for the lease to expire.
	leaseRelease
	// leaseExpire: no longer renewed; it is released after its TTL.
	leaseExpire
)

// starter is one job's start: the facts its phases gather, in order.
type starter struct {
	w   *Worker
	job protocol.Job
	key string
	inv config.Invocation
	msg jetstream.Msg // for its delivery count, and kept in progress while seeding
	log zerolog.Logger

	began   bool // registered with beginStart
	dir     journal.Dir
	arch    *sandbox.WorkspaceArchive
	archErr error // pinning the archive failed; seeding fails the run with it
	rec     kv.RunRecord
	recRev  uint64
	restart bool // rec is of a run whose first worker died before spawning it
	// claimed is the session's claim of a session's run (claim).
	claimed *session.Claimed
	r       *run
	pooled  bool // the runner came from the profile's pool
	// leaseEnd is what becomes of r's lease if the start ends without a run.
	leaseEnd    leaseEnd
	cancelStart context.CancelFunc // ends the sandbox's start (a lease lost)
}

// start creates the record and lease of a new run, starts its runner and
// publishes "started". It returns the run to follow, or nil, and the job's
// disposition: a started run's job is acknowledged beside its first lines
// (dispatch).
func (w *Worker) start(ctx context.Context, j consumer.Job, log zerolog.Logger) (*run, consumer.Disposition) {
	s := &starter{w: w, job: j.Job, key: j.Key, inv: j.Invocation, msg: j.Msg, log: log}
	defer s.end(ctx)
	for _, phase := range []func(context.Context) (consumer.Disposition, bool){s.admit, s.claim, s.record, s.take, s.spawn, s.announce} {
		if d, ended := phase(ctx); ended {
			return nil, d
		}
	}
	return s.r, consumer.Ack("run started")
}

// end undoes what the start holds and no run carries on.
func (s *starter) end(ctx context.Context) {
	if s.cancelStart != nil {
		s.cancelStart()
	}
	switch s.leaseEnd {
	case leaseRelease:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = s.r.lease.Release(rctx, 0, 0)
		cancel()
	case leaseExpire:
		s.r.lease.Stop()
	}
	if s.began {
		s.w.endStart(s.job.RunID)
	}
}

// delivered is how often the job was delivered, 0 when unknown.
func (s *starter) delivered() uint64 {
	if md, _ := s.msg.Metadata(); md != nil {
		return md.NumDelivered
	}
	return 0
}

// admit checks that the job can start here now and pins its workspace
// archive.
func (s *starter) admit(ctx context.Context) (consumer.Disposition, bool) {
	var err error
	if s.dir, err = runDir(s.w.stateDir, s.job.RunID); err != nil {
		// Decoding the job checked it already; never a path unchecked.
		return consumer.Reject(err), true
	}
	if !s.w.beginStart(s.job.RunID) {
		// Redelivered while this worker still starts it (a loaded node
		// past AckWait): that start settles the job.
		return consumer.Nak(s.w.cfg.LeaseTTL, "redelivered job of a run this worker is starting", nil), true
	}
	s.began = true
	s.arch, s.archErr = s.w.pinWorkspace(ctx, s.job)
	d, goOn := decideArchive(s.archErr, s.delivered())
	return d, !goOn
}

// record indexes the run by node and creates its record, or takes over the
// record a redelivered job's first worker left.
func (s *starter) record(ctx context.Context) (consumer.Disposition, bool) {
	w, job, inv := s.w, s.job, s.inv
	now := time.Now().UTC()
	s.rec = kv.RunRecord{
		RunID: job.RunID, State: kv.RunStarting, Node: w.node, Worker: w.id,
		Profile: inv.Profile, Attempt: 1,
		Deadline: now.Add(inv.Timeout), CreatedAt: now, Labels: job.Labels, Key: s.key,
		Interactive: inv.Stdin == config.StdinStream, IdleTimeout: inv.IdleTimeout,
		Input: kv.InputPreview(job.Input), Session: job.Session, PauseAfter: inv.Session.PauseAfter,
		Events: string(inv.Events), Policy: inv.Policy, AskTimeout: inv.AskTimeout,
	}
	if inv.TurnEnd != nil {
		s.rec.TurnEndField, s.rec.TurnEndEquals = inv.TurnEnd.Field, inv.TurnEnd.Equals
	}
	if n, err := strconv.Atoi(job.Labels[protocol.LabelAttempt]); err == nil && n > 1 {
		s.rec.Attempt = n
	}
	// The job is kept whole, so that a retry runs exactly the same job and a
	// person can re-run it (client.Rerun); a job too large to keep beside
	// its record is run without retries, and cannot be re-run. Half the
	// server's max payload at most, so the record with its other fields
	// fits one message on a server with a small one.
	if b, err := protocol.EncodeWorkerJob(job); err == nil && len(b) <= min(protocol.MaxKeptJob, int(w.nc.MaxPayload())/2) {
		s.rec.Retries, s.rec.Job = job.Retries, b
	} else if job.Retries > 0 {
		s.log.Warn().Int("bytes", len(b)).Msg("job too large to keep for retries; it will not be retried")
	}
	// Indexed before the record exists, so no run of this node is ever
	// unknown to the node-loss reaper (a stale entry costs nothing: the
	// reaper checks the record).
	if err := w.index.add(ctx, w.node, job.RunID); err != nil {
		return consumer.Nak(time.Second, "index run by node", err), true
	}
	rev, err := w.runs.Create(ctx, job.RunID, s.rec)
	if err == nil {
		s.recRev = rev
		return consumer.Disposition{}, false
	}
	if !errors.Is(err, kv.ErrExists) {
		return consumer.Nak(time.Second, "create run record", err), true
	}
	return s.redelivered(ctx)
}

// keptJob reports whether existing keeps this very job (as record wrote
// it).
func (s *starter) keptJob(existing kv.RunRecord) bool {
	if len(existing.Job) == 0 {
		return false
	}
	b, err := protocol.EncodeWorkerJob(s.job)
	return err == nil && bytes.Equal(b, existing.Job)
}

// redelivered handles a job whose run has a record already (decideRedelivery).
func (s *starter) redelivered(ctx context.Context) (consumer.Disposition, bool) {
	w, id := s.w, s.job.RunID
	existing, rev, err := w.runs.Get(ctx, id)
	if err != nil {
		return consumer.Nak(time.Second, "read the record of an existing run", err), true
	}
	if existing.Node != w.node {
		w.index.remove(ctx, w.node, id) // another node's run, unless taken over below
	}
	switch decideRedelivery(existing, s.delivered(), s.keptJob(existing)) {
	case rejectDuplicate:
		s.unclaim(ctx)
		return consumer.Reject(fmt.Errorf("%w: run %q already exists (state %s, node %s)",
			protocol.ErrDuplicateRun, id, existing.State, existing.Node)), true
	case leaveToNode:
		s.log.Info().Str("state", string(existing.State)).Str("run_node", existing.Node).Bool("spawning", existing.Spawning).
			Msg("redelivered job of an existing run; its node has it")
		return consumer.Ack("its node has the run"), true
	}
	// restartHere. The record is taken by compare-and-set first: only one
	// worker restarts the run, and its first worker, should it still be
	// preparing, can no longer mark it spawning (markSpawning), so no
	// runner of its starts in the directory cleared here.
	from := existing.Node
	if from != w.node {
		if err := w.index.add(ctx, w.node, id); err != nil {
			return consumer.Nak(time.Second, "index run by node", err), true
		}
	}
	existing.Node, existing.Worker = w.node, w.id
	if rev, err = w.runs.Update(ctx, id, existing, rev); err != nil {
		return consumer.Nak(time.Second, "take over a run whose worker died before spawning it", err), true
	}
	if from != w.node {
		w.index.remove(ctx, from, id)
		s.log.Info().Str("from_node", from).Msg("took over a run whose worker died before spawning it")
	}
	s.rec, s.recRev, s.restart = existing, rev, true
	return consumer.Disposition{}, false
}

// take acquires the run's lease and aligns to its chain.
func (s *starter) take(ctx context.Context) (consumer.Disposition, bool) {
	w := s.w
	l, err := w.live.Acquire(ctx, s.job.RunID)
	if err != nil {
		return consumer.Nak(w.cfg.LeaseTTL, "take lease of new run", err), true
	}
	s.r = &run{id: s.job.RunID, dir: s.dir, rec: s.rec, lease: l, nonce: journal.NewNonce(),
		log: s.log.With().Uint64("epoch", l.Epoch()).Logger()}
	if s.restart && !w.clearUnstarted(s.r) {
		// The runner did start: the node's recovery re-attaches it at once.
		s.leaseEnd = leaseRelease
		return consumer.Ack("the run's runner started after all"), true
	}
	pos, err := publisher.Align(ctx, w.js, w.names, s.r.id)
	if err != nil {
		s.leaseEnd = leaseExpire
		return consumer.Nak(time.Second, "align run chain", err), true
	}
	if pos.Status != nil && pos.Status.Status.Terminal() {
		// The run ended before (a take-over recorded its end while its
		// record still said starting): it never starts again.
		s.r.log.Warn().Str("status", string(pos.Status.Status)).Msg("redelivered job of a run whose chain has ended; not started again")
		s.r.chain = w.newChain(s.r, pos.Seq)
		w.recordTerminal(ctx, s.r, *pos.Status)
		return consumer.Ack("the run's chain has ended"), true
	}
	s.r.chain = w.newChain(s.r, pos.Seq)
	return consumer.Disposition{}, false
}

// spawn starts the run's runner, cold or from the profile's pool.
func (s *starter) spawn(ctx context.Context) (consumer.Disposition, bool) {
	w, r, inv := s.w, s.r, s.inv
	spec := w.sandboxSpec(r.id, r.dir, inv)
	spec.Nonce, spec.Deadline, spec.Workspace = r.nonce, s.rec.Deadline, s.arch
	// A lease lost while preparing (NATS away longer than its TTL) stops
	// the start as the worker stopping does: the run may be another
	// worker's by now.
	startCtx, cancelStart := context.WithCancel(ctx)
	s.cancelStart = cancelStart
	go func() {
		select {
		case <-r.lease.Lost():
			cancelStart()
		case <-startCtx.Done():
		}
	}()
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
		cur, rev, err := markSpawning(ctx, w.js, w.runs, r.id, s.rec, s.recRev)
		if err == nil {
			r.rec, s.recRev, marked = cur, rev, true
		}
		return err
	}
	startOpts := []sandbox.StartOption{sandbox.WithBinary(w.runnerFor(spec)), sandbox.WithBeforeSpawn(spawning)}
	seed, restored := s.seed(&spec)
	if seed != nil {
		startOpts = append(startOpts, sandbox.WithSeed(seed))
	}
	runner, pooled, err := w.startRunner(startCtx, inv.Profile, spec, inv.Input, startOpts...)
	if err == nil {
		r.runner, s.pooled = runner, pooled
		if restored != nil && restored.index != nil {
			if err := saveIndex(r, restored.parent, restored.index); err != nil {
				r.log.Warn().Err(err).Msg("keep the session's index; the run's checkpoint will hold the whole tree")
			}
		}
		return consumer.Disposition{}, false
	}
	switch decideSpawn(err, startCtx.Err() != nil, marked) {
	case spawnLeft:
		s.leaseEnd = leaseRelease
		return consumer.Leave("another worker took this run over before its runner started: " + err.Error()), true
	case spawnRetry:
		s.leaseEnd = leaseRelease
		// Delayed past this worker's own pull requests (a fetch waits 2 s),
		// which would take the redelivery into the void until AckWait.
		return consumer.Nak(3*time.Second, "stopped while preparing the sandbox", err), true
	case spawnRecover:
		r.log.Warn().Err(err).Msg("stopped while the runner started; the node's recovery takes the run over")
		s.leaseEnd = leaseRelease
		return consumer.Ack("the node's recovery has the run"), true
	}
	r.log.Error().Err(err).Msg("start runner")
	reason := "sandbox did not start: " + err.Error()
	if ae := (*archiveError)(nil); errors.As(err, &ae) {
		reason = "the workspace was not seeded: " + ae.Error()
	} else if re := (*restoreError)(nil); errors.As(err, &re) {
		reason = re.Error()
	}
	w.finish(ctx, r, protocol.Status{Status: protocol.StatusFailed, Reason: reason})
	return consumer.Ack("the run failed to start"), true
}

// seed returns what seeds the run's sandbox before its agent starts (the
// job's workspace archive, a session's checkpoint over it), or nil, and
// sets a session's command: resumed from a checkpoint, or its setup first.
// restored, for a session's run, gets the tree the seed laid out.
func (s *starter) seed(spec *sandbox.Spec) (seed sandbox.SeedFunc, restored *restoredTree) {
	w, r, inv := s.w, s.r, s.inv
	if s.job.Workspace != nil && s.job.Workspace.Git == nil { // a repository is cloned in the sandbox
		seed = w.seedWorkspace(s.job.Workspace.Object, s.arch, s.archErr, s.msg.InProgress, r.log)
	}
	if s.claimed == nil {
		return seed, nil
	}
	if s.head() != nil {
		spec.Argv = inv.ResumeArgv
	} else if len(inv.Setup) > 0 {
		spec.Argv = setupArgv(inv.Setup, path.Join(runspec.HomePath, setupGoName), spec.Argv)
	}
	restored = &restoredTree{}
	return w.seedSession(s.head(), inv.Session, seed, restored, r.log), restored
}

// announce publishes "started".
func (s *starter) announce(ctx context.Context) (consumer.Disposition, bool) {
	if err := s.r.chain.PublishStatus(ctx, s.w.status(s.r, protocol.StatusStarted)); err != nil {
		// The runner is up and journaling; recovery re-attaches it.
		s.r.log.Error().Err(err).Msg("publish started")
		s.leaseEnd = leaseExpire
		return consumer.Ack("the node's recovery has the run"), true
	}
	s.w.metrics.runsStarted.Inc()
	if s.pooled {
		s.w.metrics.runsPrestarted.Inc()
	}
	s.r.log.Info().Strs("argv", s.inv.Argv).Bool("prestarted", s.pooled).Msg("run started")
	return consumer.Disposition{}, false
}

// markRunning records r, just started, as running and then settles its
// job, beside the run's first lines rather than before them: a prestarted
// run's agent prints within milliseconds of its take, and the follower
// starts at once. The channel closes when both are done.
func (w *Worker) markRunning(ctx context.Context, r *run, settle func()) <-chan struct{} {
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
			if rec.State.Terminal() {
				return kv.ErrUnchanged // a write would drop the record's retention TTL
			}
			rec.State, rec.StartedAt, rec.Worker = kv.RunRunning, time.Now().UTC(), w.id
			rec.Spawning = false // it spawned: the mark only guards the start
			return nil
		}); err != nil {
			r.log.Warn().Err(err).Msg("mark run running")
		}
		settle()
	}()
	return settled
}

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

// sandboxSpec is the spec of run id in dir for inv, without what is the
// start's own (nonce, deadline, workspace archive).
func (w *Worker) sandboxSpec(id string, dir journal.Dir, inv config.Invocation) sandbox.Spec {
	return sandbox.Spec{
		RunID: id, RunDir: string(dir), Argv: inv.Argv, Baton: w.binary, Env: inv.Env, Files: inv.Files, HomeFiles: inv.HomeFiles,
		KillGrace: 5 * time.Second,
		Network:   inv.Network, SandboxUID: w.cfg.SandboxUID, SandboxGID: w.cfg.SandboxUID,
		Mounts: inv.Mounts, Limits: inv.Limits, AgentUID: inv.AgentUID, AgentGID: inv.AgentGID, Stdin: inv.Stdin, InterruptLine: inv.Interrupt.Line, Tools: inv.Tools,
		Nice: inv.Nice, CgroupParent: w.cfg.CgroupParent, Outputs: inv.Outputs, Git: inv.Git,
	}
}

// clearUnstarted removes what a worker that died while starting r left
// behind, and reports whether r can be started afresh: only when no runner
// ever journaled it. The caller holds r's lease.
func (w *Worker) clearUnstarted(r *run) bool {
	if runnerTookRun(r.dir) {
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

// runnerFor is the binary whose runner stages run spec: baton-runner,
// which starts fast and links little, unless the run has secrets, whose
// TLS only baton links (package sandbox/secrettls).
func (w *Worker) runnerFor(spec sandbox.Spec) string {
	if len(spec.Network.Secrets) > 0 {
		return w.binary
	}
	return w.runner
}
