package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/session"
)

// A session's runs (protocol.Job.Session): their jobs wait in the stream,
// in the order they were submitted on the session's subject, until the
// session has no live run; a run starts from the session's head
// checkpoint, and its end stores a checkpoint before its terminal status
// (as outputs are, I9), which moves the head once the status is out.

// sessionWait is how long a session's job waits in the stream before it
// is delivered again, its delivery count n: soon at first, then at most
// every few seconds while the session's live run goes on.
func sessionWait(n uint64) time.Duration {
	if n < 1 {
		n = 1
	}
	return min(time.Second<<min(n-1, 3), 5*time.Second)
}

// claim makes the run its session's live run, in the order the session's
// jobs were submitted: a job that is not the first left on its session's
// subject, or whose session has another live run, waits in the stream,
// holding no slot. A job of a session that arrived on the run subject is
// moved to its session's, where the order is kept.
func (s *starter) claim(ctx context.Context) (consumer.Disposition, bool) {
	job, w := s.job, s.w
	if job.Session == "" {
		return consumer.Disposition{}, false
	}
	subject := w.names.SessionJobSubject(job.Session)
	if s.msg.Subject() != subject {
		if err := w.moveToSession(ctx, s.msg, subject, job.RunID); err != nil {
			return consumer.Nak(time.Second, "move a session's job to its subject", err), true
		}
		return consumer.Ack("moved to its session's subject, where its runs start in order"), true
	}
	md, err := s.msg.Metadata()
	if err != nil {
		return consumer.Nak(time.Second, "read the job's stream sequence", err), true
	}
	first, err := w.firstPending(ctx, subject)
	if err != nil {
		return consumer.Nak(time.Second, "find the session's first job", err), true
	}
	if first != md.Sequence.Stream {
		return consumer.Nak(sessionWait(md.NumDelivered), fmt.Sprintf("session %s: a job submitted before (stream sequence %d) starts first", job.Session, first), nil), true
	}
	c, err := w.sessions.Claim(ctx, job.Session, s.inv.Profile, job.RunID, job.Labels, w.lookupRun)
	switch {
	case errors.Is(err, session.ErrRefused):
		return consumer.Reject(fmt.Errorf("%w: %v", protocol.ErrInvalidJob, err)), true
	case err != nil:
		return consumer.Nak(time.Second, "claim the session", err), true
	case c.Wait:
		return consumer.Nak(sessionWait(md.NumDelivered), c.Why, nil), true
	}
	s.claimed = &c
	if c.Record.Head() != nil && job.Workspace != nil {
		s.unclaim(ctx)
		return consumer.Reject(fmt.Errorf("%w: session %s has a checkpoint, which its runs start from: a workspace archive seeds only its first run", protocol.ErrInvalidJob, job.Session)), true
	}
	return consumer.Disposition{}, false
}

// unclaim gives the session up: the job that claimed it is refused.
func (s *starter) unclaim(ctx context.Context) {
	if s.claimed == nil {
		return
	}
	if err := s.w.sessions.Unclaim(ctx, s.job.Session, s.job.RunID, *s.claimed); err != nil {
		s.log.Warn().Err(err).Msg("give up the session's claim (its next run takes it over in 2 minutes)")
	}
	s.claimed = nil
}

// head is the checkpoint the run starts from, nil for a session's first
// run (or a run of none).
func (s *starter) head() *kv.SessionCheckpoint {
	if s.claimed == nil {
		return nil
	}
	return s.claimed.Record.Head()
}

// moveToSession publishes msg's job again on its session's subject, where
// its order among the session's jobs is kept, under a message id of its
// own (the run subject's is the runId, and the two may meet within the
// duplicates window).
func (w *Worker) moveToSession(ctx context.Context, msg jetstream.Msg, subject, runID string) error {
	m := nats.NewMsg(subject)
	m.Data = msg.Data()
	for k, v := range msg.Headers() {
		m.Header[k] = v
	}
	m.Header.Set(nats.MsgIdHdr, "session-move-"+runID)
	_, err := w.js.PublishMsg(ctx, m, jetstream.WithExpectStream(w.names.JobsStream()))
	return err
}

// firstPending is the stream sequence of the first job left on subject,
// read from the stream's leader (the work queue keeps a job until it is
// acknowledged, so it is the oldest not yet started).
func (w *Worker) firstPending(ctx context.Context, subject string) (uint64, error) {
	st, err := w.js.Stream(ctx, w.names.JobsStream())
	if err != nil {
		return 0, err
	}
	m, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// lookupRun reads a run's record for the session store: nil when it has
// none.
func (w *Worker) lookupRun(ctx context.Context, runID string) (*kv.RunRecord, error) {
	rec, _, err := w.runs.Get(ctx, runID)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// idleLimit is how long a run may wait for input, and whether reaching it
// pauses the run (a session's pauseAfter, when it comes first) rather
// than ends it for idleness; 0: no bound.
func idleLimit(rec kv.RunRecord) (time.Duration, bool) {
	switch p, i := rec.PauseAfter, rec.IdleTimeout; {
	case rec.Session != "" && p > 0 && (i <= 0 || p <= i):
		return p, true
	default:
		return i, false
	}
}

// requestPause records that r is paused, before its agent is stopped as
// an idle one: whoever holds the run when its sentinel comes ends it
// "paused". It reports whether the pause may go on.
func (w *Worker) requestPause(ctx context.Context, r *run) bool {
	rec, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
		if rec.State.Terminal() {
			return errors.New("the run has ended")
		}
		if rec.PauseRequested {
			return kv.ErrUnchanged
		}
		rec.PauseRequested = true
		return nil
	})
	if err != nil {
		r.log.Warn().Err(err).Msg("record the pause; the run goes on waiting")
		return false
	}
	// Not in r.rec, which r's follower reads meanwhile.
	r.pauseAsked.Store(rec.PauseRequested)
	return true
}

// runnerExitWait bounds awaitRunnerGone: a runner exits within
// milliseconds of its sentinel.
const runnerExitWait = 5 * time.Second

// awaitRunnerGone waits, bounded, for r's runner to exit after its
// sentinel, so that a "paused" status is true when it goes out: nothing
// of the run is left on the node.
func (w *Worker) awaitRunnerGone(r *run) {
	deadline := time.Now().Add(runnerExitWait)
	for {
		alive, err := sandbox.Alive(r.dir)
		if err == nil && !alive {
			return
		}
		if time.Now().After(deadline) {
			r.log.Warn().Err(err).Dur("waited", runnerExitWait).Msg("the paused run's runner has not exited; pausing anyway")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pausedStatus turns the idle end of a run whose pause was asked (by this
// worker, asked, or by one before it, in rec) into "paused".
func pausedStatus(rec kv.RunRecord, asked bool, st protocol.Status) protocol.Status {
	if (asked || rec.PauseRequested) && st.Status == protocol.StatusTimeout && st.Reason == sandbox.IdleReason {
		st.Status = protocol.StatusPaused
		st.Reason = fmt.Sprintf("paused after waiting %s for input", rec.PauseAfter)
	}
	return st
}

// sessionTurn records in r's session that its run waits for input, or
// runs a turn; a failure costs only the state a client sees.
func (w *Worker) sessionTurn(ctx context.Context, r *run, waiting bool) {
	if r.rec.Session == "" {
		return
	}
	if err := w.sessions.SetWaiting(ctx, r.rec.Session, r.id, waiting); err != nil {
		r.log.Warn().Err(err).Msg("record the session's state")
	}
}

// setupArgv runs a profile's setup commands before the agent argv of a
// session's first run (one with no checkpoint yet): a shell runs each in
// turn in the sandbox, as the agent, with its output on the run's chain
// (a line naming it first), stops the run at the first that fails, says
// setup is done (setupDoneLine), waits for goFile (the worker writes it
// once it checkpointed setup's work), and then becomes the agent. The
// session's later runs start from a checkpoint and never run setup again.
func setupArgv(setup []string, goFile string, argv []string) []string {
	var b strings.Builder
	for i, c := range setup {
		fmt.Fprintf(&b, "printf '%%s\\n' %s\n", shellQuote(fmt.Sprintf("baton setup %d/%d: %s", i+1, len(setup), c)))
		fmt.Fprintf(&b, "( %s ) 2>&1 || { s=$?; printf 'baton setup %d/%d failed with exit code %%s\\n' \"$s\" >&2; exit \"$s\"; }\n", c, i+1, len(setup))
	}
	// Then wait for the worker's checkpoint of what setup made (it writes
	// setupGoName once the checkpoint is the session's head), bounded: a
	// worker that cannot checkpoint leaves it to the run's own.
	fmt.Fprintf(&b, "printf '%%s\\n' %s\n", shellQuote(setupDoneLine))
	fmt.Fprintf(&b, "i=0\nwhile [ ! -e %s ]; do i=$((i+1)); if [ \"$i\" -gt %d ]; then printf '%%s\\n' %s >&2; break; fi; sleep 0.05; done\n",
		shellQuote(goFile), int(setupWait/(50*time.Millisecond)),
		shellQuote(fmt.Sprintf("baton setup: no checkpoint of it after %v; the agent starts, and the run's checkpoint takes setup's work", setupWait)))
	b.WriteString(`exec "$@"` + "\n")
	return append([]string{"/bin/sh", "-c", b.String(), "baton-setup"}, argv...)
}

// setupDoneLine is what the setup wrapper prints once setup has run; the
// worker then checkpoints the session (setupCheckpoint).
const setupDoneLine = "baton setup done: checkpointing the session"

// setupGoName is the file in the agent's home whose creation lets the
// setup wrapper start the agent; no checkpoint holds it.
const setupGoName = ".baton-setup-go"

// setupWait bounds the wrapper's wait for the worker's checkpoint of
// setup: a checkpoint's own bound.
const setupWait = checkpointTimeout

// setupCheckpoint stores the checkpoint of what r's setup made, before
// its agent starts, and makes it the session's head, then lets the agent
// start. A checkpoint that fails for the tree's own reasons (a limit)
// lets the agent start too: the run's own checkpoint takes setup's work.
// An error means the run is left to a successor (the worker stops, the
// lease is lost, NATS is gone), which checkpoints setup again unless the
// session's head is this setup's already (resumeSetup).
func (w *Worker) setupCheckpoint(ctx context.Context, r *run) error {
	r.onSetup = nil
	if w.testBeforeSetupCheckpoint != nil {
		w.testBeforeSetupCheckpoint(ctx, r.id)
	}
	if err := ctx.Err(); err != nil {
		// Nothing of the agent runs yet: the successor takes it all.
		return fmt.Errorf("the worker stops before checkpointing the session's setup: %w", err)
	}
	sess := w.profileSession(r.rec.Profile)
	cctx, cancel := w.endingContext(ctx, r, checkpointTimeout, errCheckpointTimeout)
	defer cancel()
	start := time.Now()
	object := checkpoint.SetupName(r.rec.Session, r.id)
	m, index, err := checkpoint.Write(cctx, w.checkpoints, w.sessionTree(r, sess), checkpoint.Options{Session: r.rec.Session, Run: r.id, Object: object})
	var info *jetstream.ObjectInfo
	if err == nil {
		info, err = w.checkpoints.GetInfo(cctx, object)
	}
	if err == nil {
		cp := sessionCheckpoint(m, info)
		err = w.sessions.Setup(cctx, r.rec.Session, r.id, *cp, sess.Keep)
	}
	switch {
	case err == nil:
		if err := saveIndex(r, object, index); err != nil {
			r.log.Warn().Err(err).Msg("keep the setup's index; the run's checkpoint will hold the whole tree")
		}
		r.log.Info().Str("checkpoint", object).Int("files", m.Files).Int64("bytes", m.Bytes).Dur("took", time.Since(start)).
			Msg("session's setup checkpointed")
	case ctx.Err() != nil || r.lease.Err() != nil || w.disconnected(err):
		return fmt.Errorf("checkpoint the session's setup: %w", err)
	default:
		r.log.Warn().Err(err).Msg("checkpoint the session's setup; the run's own checkpoint will take its work")
	}
	return releaseSetup(r)
}

// releaseSetup lets r's setup wrapper start the agent.
func releaseSetup(r *run) error {
	home, err := os.OpenRoot(r.dir.Home())
	if err != nil {
		return fmt.Errorf("let the agent start after setup: %w", err)
	}
	defer home.Close()
	// Through the root: the agent's home is the agent's, links included.
	f, err := home.OpenFile(setupGoName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("let the agent start after setup: %w", err)
	}
	return f.Close()
}

// resumeSetup is a successor's part of a session's setup that r's last
// holder may have left undone: nothing when the session's head is the
// setup's checkpoint already (but releasing the wrapper again); the
// checkpoint when the wrapper said setup was done (its line is in the
// journal, before the agent could start); else waiting for that line.
func (w *Worker) resumeSetup(ctx context.Context, r *run) error {
	inv := w.cfg.Profiles[r.rec.Profile]
	if r.rec.Session == "" || len(inv.Setup) == 0 || r.rec.State.Terminal() {
		return nil
	}
	// Whatever comes of it, a setup line still to come is acted on.
	r.onSetup = w.setupCheckpoint
	rec, _, err := w.sessions.Get(ctx, r.rec.Session)
	if err != nil {
		return fmt.Errorf("read the session to resume its setup: %w", err)
	}
	object := checkpoint.SetupName(r.rec.Session, r.id)
	for _, c := range rec.Checkpoints {
		switch {
		case c.Object == object:
			r.onSetup = nil
			return releaseSetup(r)
		case c.Run != r.id:
			r.onSetup = nil
			return nil // the run started from a checkpoint: no setup
		}
	}
	done, err := journalHasLine(r.dir.Journal(), r.offset, setupDoneLine)
	if err != nil {
		return err
	}
	if done {
		return w.setupCheckpoint(ctx, r)
	}
	return nil
}

// journalHasLine reports whether the journal at path holds line, whole,
// in its first limit bytes.
func journalHasLine(path string, limit int64, line string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(io.LimitReader(f, limit), 64<<10)
	atStart := true
	for {
		b, err := br.ReadSlice('\n')
		if atStart && err == nil && string(b[:len(b)-1]) == line {
			return true, nil
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			atStart = false // the rest of a long line follows
		case errors.Is(err, io.EOF):
			return false, nil
		case err != nil:
			return false, err
		default:
			atStart = true
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// restoreError is a session's checkpoint that could not be restored: the
// run fails, and the session keeps its head for the next.
type restoreError struct {
	object string
	err    error
}

func (e *restoreError) Error() string {
	return fmt.Sprintf("the session's checkpoint %s could not be restored: %v", e.object, e.err)
}
func (e *restoreError) Unwrap() error { return e.err }

// restoredTree is what a session's seed restored, for its checkpoint to
// build on: the checkpoint and the index of the tree it left.
type restoredTree struct {
	parent string
	index  *checkpoint.Index
}

// seedSession is the sandbox.SeedFunc of a session's run: then (a
// workspace archive of its first run), or the session's head checkpoint
// restored into the workspace and home with a workspace archive's rules,
// before the job's files and before the agent; into out it puts the
// index of the tree as restored, which the run's checkpoint builds on.
func (w *Worker) seedSession(head *kv.SessionCheckpoint, sess config.Session, then sandbox.SeedFunc, out *restoredTree, log zerolog.Logger) sandbox.SeedFunc {
	return func(ctx context.Context, ws, home *os.Root, uid, gid int) error {
		if then != nil {
			if err := then(ctx, ws, home, uid, gid); err != nil {
				return err
			}
		}
		if head == nil {
			return nil
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
		defer cancel()
		m, err := checkpoint.Restore(rctx, w.checkpoints, head.Object, checkpoint.Dest{
			Workspace: ws, Home: home, Chown: uid >= 0, UID: uid, GID: gid, MaxBytes: int64(sess.MaxBytes),
		})
		if err != nil {
			return &restoreError{head.Object, err}
		}
		x, _, err := checkpoint.ScanRoots(ctx, ws, home, checkpoint.Tree{Exclude: sess.Exclude, MaxBytes: int64(sess.MaxBytes)})
		if err != nil {
			log.Warn().Err(err).Msg("index the restored tree; the run's checkpoint will hold the whole tree")
		} else {
			out.parent, out.index = head.Object, x
		}
		log.Info().Str("checkpoint", head.Object).Int("files", m.Files).Int64("bytes", m.TreeBytes).Int("objects", len(m.Chain)).
			Dur("took", time.Since(start)).Msg("session restored")
		return nil
	}
}

// checkpointTimeout bounds one checkpoint: a tree of a GiB on a slow disk.
const checkpointTimeout = 10 * time.Minute

// errCheckpointTimeout ends a checkpoint that took longer than
// checkpointTimeout.
var errCheckpointTimeout = errors.New("the checkpoint took longer than " + checkpointTimeout.String())

// checkpointRun stores the checkpoint of r, a session's run that ended,
// and names it on st, its terminal status about to go out; a checkpoint
// that fails for the tree's own reasons (a limit) is named in
// st.CheckpointError, and the session keeps its head. It reports false
// when the run is left to a successor instead (the lease lost, NATS
// gone), which checkpoints again under the same names.
func (w *Worker) checkpointRun(ctx context.Context, r *run, st *protocol.Status) bool {
	st.Session = r.rec.Session
	if st.Status == protocol.StatusLost {
		return true
	}
	sess := w.profileSession(r.rec.Profile)
	cctx, cancel := w.endingContext(ctx, r, checkpointTimeout, errCheckpointTimeout)
	defer cancel()
	start := time.Now()
	if home, err := os.OpenRoot(r.dir.Home()); err == nil {
		_ = home.Remove(setupGoName) // the setup wrapper's, not the session's
		home.Close()
	}
	parent, index := w.loadIndex(cctx, r)
	m, _, err := checkpoint.Write(cctx, w.checkpoints, w.sessionTree(r, sess), checkpoint.Options{
		Session: r.rec.Session, Run: r.id, Object: checkpoint.Name(r.rec.Session, r.id), Parent: parent, Index: index,
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.log.Warn().Err(err).Msg("stopped while checkpointing; handing the run off")
		w.handoff(r)
		return false
	case r.lease.Err() != nil || w.disconnected(err):
		r.log.Error().Err(err).Msg("checkpoint; a successor will checkpoint again")
		r.lease.Stop()
		return false
	default:
		if errors.Is(context.Cause(cctx), errCheckpointTimeout) {
			err = errCheckpointTimeout
		}
		st.CheckpointError = err.Error()
		r.log.Warn().Err(err).Msg("checkpoint failed; the session keeps its previous one")
		return true
	}
	info, err := w.checkpoints.GetInfo(cctx, m.Object)
	if err != nil {
		r.lease.Stop()
		r.log.Error().Err(err).Msg("read the checkpoint's info; a successor will checkpoint again")
		return false
	}
	r.checkpoint = sessionCheckpoint(m, info)
	wire := r.checkpoint.Wire()
	st.Checkpoint = &wire
	r.log.Info().Str("checkpoint", m.Object).Bool("base", m.Full()).Int("files", m.Files).Int64("bytes", m.Bytes).
		Dur("took", time.Since(start)).Msg("session checkpointed")
	return true
}

// sessionCheckpoint is the session's view of the checkpoint m, stored as
// info.
func sessionCheckpoint(m *checkpoint.Manifest, info *jetstream.ObjectInfo) *kv.SessionCheckpoint {
	return &kv.SessionCheckpoint{
		Object: m.Object, Digest: info.Digest, Size: info.Size, Files: m.Files, TreeBytes: m.TreeBytes,
		Run: m.Run, Created: m.Created, Chain: m.Chain,
	}
}

// profileSession is profile's session block, with its defaults.
func (w *Worker) profileSession(profile string) config.Session {
	return w.cfg.Profiles[profile].Session.OrDefault()
}

// sessionTree is what a checkpoint of r stores: its workspace and home.
func (w *Worker) sessionTree(r *run, sess config.Session) checkpoint.Tree {
	return checkpoint.Tree{Workspace: r.dir.Workspace(), Home: r.dir.Home(), Exclude: sess.Exclude, MaxBytes: int64(sess.MaxBytes)}
}

// saveIndex writes, for r's checkpoint to build on, the checkpoint parent
// its tree was restored from and the index of that tree: the parent's
// object on a line, then the index.
func saveIndex(r *run, parent string, x *checkpoint.Index) error {
	b, err := checkpoint.MarshalIndex(x)
	if err != nil {
		return err
	}
	return os.WriteFile(r.dir.CheckpointIndex(), append([]byte(parent+"\n"), b...), 0o600)
}

// loadIndex reads what saveIndex wrote, and the parent's manifest; nil,
// nil when there is none (the run's checkpoint is then a base).
func (w *Worker) loadIndex(ctx context.Context, r *run) (*checkpoint.Manifest, *checkpoint.Index) {
	b, err := os.ReadFile(r.dir.CheckpointIndex())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var x *checkpoint.Index
	var m *checkpoint.Manifest
	if err == nil {
		parent, rest, _ := bytes.Cut(b, []byte("\n"))
		if x, err = checkpoint.UnmarshalIndex(rest); err == nil {
			m, err = checkpoint.ReadManifest(ctx, w.checkpoints, string(parent))
		}
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("the session's index is unreadable; the checkpoint holds the whole tree")
		return nil, nil
	}
	return m, x
}

// resolveCheckpoint sets r.checkpoint, for a session's run whose terminal
// status st is out, from the checkpoint st names when r's holder did not
// take it (a successor read st from the chain): its chain is in its
// manifest. A manifest that cannot be read leaves it nil, and so the
// session's head as it is; the read, before the terminal record's write,
// takes at most one try's time of that write.
func (w *Worker) resolveCheckpoint(ctx context.Context, r *run, st protocol.Status) {
	if r.rec.Session == "" || r.checkpoint != nil || st.Checkpoint == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordAttempt)
	defer cancel()
	m, err := checkpoint.ReadManifest(ctx, w.checkpoints, st.Checkpoint.Object)
	if err != nil {
		r.log.Warn().Err(err).Msg("read the checkpoint's manifest; the session keeps its head")
		return
	}
	r.checkpoint = &kv.SessionCheckpoint{Object: m.Object, Digest: st.Checkpoint.Digest, Size: st.Checkpoint.Size,
		Files: m.Files, TreeBytes: m.TreeBytes, Run: m.Run, Created: m.Created, Chain: m.Chain}
}

// endSession ends r's session's claim on r, whose terminal status st is
// out: its checkpoint (resolveCheckpoint) becomes the session's head.
func (w *Worker) endSession(ctx context.Context, r *run, st protocol.Status) {
	id := r.rec.Session
	if id == "" {
		return
	}
	var err error
	if st.Status == protocol.StatusLost {
		err = w.sessions.Lost(ctx, id, r.id)
	} else {
		err = w.sessions.End(ctx, id, r.id, st.Status == protocol.StatusPaused, r.checkpoint, st.CheckpointError, w.profileSession(r.rec.Profile).Keep, st.Usage)
	}
	if err != nil {
		// The session's next job finishes it (session.Store.Claim).
		r.log.Warn().Err(err).Msg("record the session's end")
	}
}
