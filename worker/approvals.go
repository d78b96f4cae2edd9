package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// A run whose record has a policy has an approver. Every permission prompt
// its agent prints becomes an approval record before the prompt's line is
// on the chain (publishPrompt): the policy decides it, or asks a person
// (pending). The approver watches the run's records and writes to the
// agent's stdin, as stored input (exactly once: the record keeps the
// sequence, the store dedupes a retry by Msg-Id), whatever a record calls
// for: a decision's answer; after askTimeout with no answer, a hold (a
// denial saying the request awaits approval); after a hold, a person's
// allow as a follow-up turn asking the agent to retry. Any worker answers
// an approve request (handleApprove) with a compare-and-set on the
// record; the run's holder sees the change in its watch. A successor's
// watch starts with every record of the run, so nothing decided is lost
// in a hand-off or a crash.

// approvalTimeout bounds one approval request's or one delivery's work.
const approvalTimeout = 5 * time.Second

// approvalRetry is how soon a delivery that failed (NATS down) is tried
// again.
const approvalRetry = time.Second

// errDecided refuses an answer to an approval decided before.
var errDecided = errors.New("decided before")

// approver follows one run's approvals while the run is held here.
type approver struct {
	w       *Worker
	r       *run
	timeout time.Duration
	// reader is the publish loop's alone: it reads prompts in order.
	reader policy.Reader

	mu     sync.Mutex
	all    map[string]protocol.Approval
	timers map[string]*time.Timer
	synced chan struct{}
	kick   chan string
	// life is the approver's: what outlives one step (a retry's wait).
	life context.Context

	// open are the approvals whose agent waits on a person, as the chain
	// says: from its prompt to baton's input for it (an answer, or a
	// hold). The
	// publish loop alone keeps them, and the status they call for
	// ("waiting" while any is open), so statuses sit in the chain's order.
	open    map[string]bool
	waiting bool
}

// startApprovals starts r's approver if r has a policy; stop ends it.
func (w *Worker) startApprovals(ctx context.Context, r *run) (stop func()) {
	if r.rec.Policy == nil {
		return func() {}
	}
	a := &approver{w: w, r: r, timeout: r.rec.AskTimeout,
		all: map[string]protocol.Approval{}, timers: map[string]*time.Timer{},
		synced: make(chan struct{}), kick: make(chan string, 16), open: map[string]bool{}}
	if a.timeout <= 0 {
		a.timeout = DefaultAskTimeout
	}
	r.approver = a
	a.restate(ctx)
	ctx, cancel := context.WithCancel(ctx)
	a.life = ctx
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx)
	}()
	return func() {
		cancel()
		<-done
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, t := range a.timers {
			t.Stop()
		}
		w.metrics.approvalsPending.Sub(float64(len(a.open)))
	}
}

// restate, for a run taken over while its agent waited on approvals,
// says so again ("waiting", reason approval) before the follow starts,
// as trackTurns restates a wait for input.
func (a *approver) restate(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	all, err := a.w.listApprovals(lctx, protocol.ApprovalKeys(a.r.id))
	if err != nil {
		a.r.log.Warn().Err(err).Msg("read the run's approvals")
		return
	}
	for _, ap := range all {
		if ap.Open() {
			a.open[ap.ID] = true
		}
	}
	a.w.metrics.approvalsPending.Add(float64(len(a.open)))
	a.settle(ctx)
}

// settle publishes "waiting" (reason approval) when the agent waits on
// an open approval, and "running" once it no longer does. The publish
// loop calls it (and restate, before the loop starts).
func (a *approver) settle(ctx context.Context) {
	var s protocol.StatusType
	switch {
	case len(a.open) > 0 && !a.waiting:
		s, a.waiting = protocol.StatusWaiting, true
	case len(a.open) == 0 && a.waiting:
		s, a.waiting = protocol.StatusRunning, false
	default:
		return
	}
	st := a.w.status(a.r, s)
	if s == protocol.StatusWaiting {
		st.Reason = protocol.ReasonApproval
	}
	if err := a.r.chain.PublishStatus(ctx, st); err != nil {
		a.r.log.Warn().Err(err).Str("status", string(s)).Msg("publish the approvals' status")
	}
}

// inputPublished is told of each input the chain took: baton's own for
// an approval closes it.
func (a *approver) inputPublished(ctx context.Context, l follow.Line) {
	rec, _ := journal.ParseInputRecord(l.Data, a.r.nonce)
	id := rec.Headers[protocol.HeaderApproval]
	if id == "" || !a.open[id] {
		return
	}
	delete(a.open, id)
	a.w.metrics.approvalsPending.Dec()
	a.settle(ctx)
}

// DefaultAskTimeout is a profile's askTimeout when it sets none: below
// Claude Code's own wait for an answer (about 60 s).
const DefaultAskTimeout = 45 * time.Second

// run watches the run's approval records until ctx ends, watching again
// after the watch fails.
func (a *approver) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := a.watch(ctx); err != nil && ctx.Err() == nil {
			a.r.log.Warn().Err(err).Msg("watch the run's approvals; watching again")
			clock.Sleep(ctx, approvalRetry)
		}
	}
}

func (a *approver) watch(ctx context.Context) error {
	kw, err := a.w.approvals.KV().Watch(ctx, protocol.ApprovalKeys(a.r.id))
	if err != nil {
		return err
	}
	defer kw.Stop()
	live := false
	resync := time.NewTicker(approvalResync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			// A watch may fall silent through a server's loss without
			// ending: what still calls for work is read again.
			a.mu.Lock()
			var ids []string
			for id, ap := range a.all {
				if unfinished(ap) {
					ids = append(ids, id)
				}
			}
			a.mu.Unlock()
			for _, id := range ids {
				a.refresh(ctx, id)
			}
		case id := <-a.kick:
			a.refresh(ctx, id)
		case e, ok := <-kw.Updates():
			if !ok {
				return errors.New("the watch ended")
			}
			if e == nil {
				if !live {
					live = true
					select {
					case <-a.synced:
					default:
						close(a.synced)
					}
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			ap, err := kv.Decode[protocol.Approval](e.Key(), e.Revision(), e.Value())
			if err != nil {
				a.r.log.Warn().Err(err).Msg("an approval record")
				continue
			}
			a.mu.Lock()
			a.all[ap.ID] = ap
			a.mu.Unlock()
			if live {
				a.notice(ap)
			}
			a.step(ctx, ap)
		}
	}
}

// approvalResync is how often records that still call for work are read
// again, beside the watch.
const approvalResync = 5 * time.Second

// unfinished reports whether ap may still call for work: a person's
// answer, or an input baton has to write.
func unfinished(ap protocol.Approval) bool {
	switch {
	case ap.State == protocol.ApprovalPending:
		return true
	case ap.HeldAt != nil && ap.HoldSeq == 0:
		return true
	case ap.State == protocol.ApprovalDenied && ap.HeldAt != nil:
		return false
	}
	return ap.AnswerSeq == 0
}

// refresh reads approval id again and does what it calls for.
func (a *approver) refresh(ctx context.Context, id string) {
	gctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	ap, _, err := a.w.approvals.Get(gctx, protocol.ApprovalKey(a.r.id, id))
	cancel()
	a.mu.Lock()
	if err == nil {
		a.all[id] = ap
	} else {
		ap = a.all[id]
	}
	a.mu.Unlock()
	if ap.ID != "" {
		a.step(ctx, ap)
	}
}

// step does what ap calls for now.
func (a *approver) step(ctx context.Context, ap protocol.Approval) {
	switch {
	case ap.HeldAt != nil && ap.HoldSeq == 0:
		a.deliver(ctx, ap, deliverHold)
	case ap.State != protocol.ApprovalPending && ap.HeldAt == nil && ap.AnswerSeq == 0:
		a.deliver(ctx, ap, deliverAnswer)
	case ap.State == protocol.ApprovalAllowed && ap.HeldAt != nil && ap.AnswerSeq == 0:
		a.deliver(ctx, ap, deliverFollowUp)
	case ap.Open():
		a.arm(ctx, ap)
	}
}

// arm starts the askTimeout clock of the open approval ap, from when it
// was asked (a successor's clock runs on from then).
func (a *approver) arm(ctx context.Context, ap protocol.Approval) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timers[ap.ID] != nil {
		return
	}
	a.timers[ap.ID] = time.AfterFunc(max(time.Until(ap.AskedAt.Add(a.timeout)), 0), func() { a.hold(ctx, ap.ID) })
}

// hold marks the approval id held, if nobody answered it: the watch then
// tells the agent it awaits approval. The record's compare-and-set orders
// it with a person's answer: whichever is first wins.
func (a *approver) hold(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	_, _, err := a.w.approvals.Modify(ctx, protocol.ApprovalKey(a.r.id, id), func(ap *protocol.Approval) error {
		if !ap.Open() {
			return kv.ErrUnchanged
		}
		now := time.Now().UTC()
		ap.HeldAt = &now
		return nil
	})
	if err != nil && ctx.Err() == nil {
		a.r.log.Warn().Err(err).Str("approval", id).Msg("hold the approval; trying again")
		a.mu.Lock()
		delete(a.timers, id)
		a.mu.Unlock()
		a.retry(id)
	}
}

// retry looks at approval id again after approvalRetry.
func (a *approver) retry(id string) {
	time.AfterFunc(approvalRetry, func() {
		select {
		case a.kick <- id:
		case <-a.life.Done():
		}
	})
}

type delivery int

const (
	deliverAnswer delivery = iota
	deliverHold
	deliverFollowUp
)

// deliver stores what ap calls for as the run's next input and records
// its sequence in ap.
func (a *approver) deliver(ctx context.Context, ap protocol.Approval, what delivery) {
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	line, err := a.promptLine(ap)
	if err != nil {
		a.r.log.Error().Err(err).Str("approval", ap.ID).Msg("read the prompt's line from the journal: it cannot be answered")
		return
	}
	req, ok := (&policy.Reader{}).Request(line)
	if !ok {
		a.r.log.Error().Str("approval", ap.ID).Msg("the journal's line at the approval's offset is not its prompt: it cannot be answered")
		return
	}
	h := nats.Header{}
	h.Set(protocol.HeaderInputKind, protocol.InputKindDecision)
	h.Set(protocol.HeaderApproval, ap.ID)
	var data []byte
	var msgID string
	switch what {
	case deliverAnswer:
		data, msgID = req.Answer(ap.State == protocol.ApprovalAllowed, ap.Message), "answer:"+ap.ID
		h.Set(protocol.HeaderDecidedBy, ap.DecidedBy)
		if ap.DecidedBy == protocol.DecidedByPolicy || strings.HasPrefix(ap.Rule, grantRule) {
			h.Set(protocol.HeaderRule, ap.Rule)
		}
	case deliverHold:
		data, msgID = req.Answer(false, holdMessage(ap)), "hold:"+ap.ID
		h.Set(protocol.HeaderDecidedBy, protocol.DecidedByTimeout)
	case deliverFollowUp:
		if a.r.pauseAsked.Load() {
			// The run is pausing: its stdin takes nothing more, and the
			// session's next run starts with the follow-up
			// (followUpPaused).
			return
		}
		data, msgID = req.FollowUp(followUpText(ap)), "followup:"+ap.ID
		h.Set(protocol.HeaderInputKind, protocol.InputKindFollowUp)
		h.Set(protocol.HeaderDecidedBy, ap.DecidedBy)
	}
	data = append(data, '\n')
	seq, prev, fresh, err := a.w.storeInput(ctx, a.r.id, data, false, h, msgID)
	if errors.Is(err, errInputClosed) {
		a.r.log.Warn().Str("approval", ap.ID).Msg("the agent's stdin is closed: the approval's answer cannot be written")
		return
	}
	if err != nil {
		a.r.log.Warn().Err(err).Str("approval", ap.ID).Msg("store the approval's input; trying again")
		a.retry(ap.ID)
		return
	}
	a.w.tellInput(ctx, a.r.id, fresh, sandbox.InputMessage{Seq: seq, Prev: prev.seq, EOF: prev.eof, Data: data, Headers: decisionHeaders(h)})
	if _, _, err := a.w.approvals.Modify(ctx, protocol.ApprovalKey(a.r.id, ap.ID), func(ap *protocol.Approval) error {
		p := &ap.AnswerSeq
		if what == deliverHold {
			p = &ap.HoldSeq
		}
		if *p != 0 {
			return kv.ErrUnchanged
		}
		*p = seq
		return nil
	}); err != nil {
		// Stored: a retry finds it by its Msg-Id within the input
		// stream's duplicates window.
		a.r.log.Warn().Err(err).Str("approval", ap.ID).Msg("record the approval's input; trying again")
		a.retry(ap.ID)
	}
}

// promptLine reads ap's prompt from the run's journal.
func (a *approver) promptLine(ap protocol.Approval) ([]byte, error) {
	if ap.End <= ap.Offset || ap.End-ap.Offset > maxPromptBytes {
		return nil, fmt.Errorf("approval %s: line [%d, %d) out of bounds", ap.ID, ap.Offset, ap.End)
	}
	f, err := a.r.dir.Open(journal.JournalName, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, ap.End-ap.Offset)
	if _, err := f.ReadAt(b, ap.Offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return trimNewline(b), nil
}

// maxPromptBytes bounds a prompt line read whole (a Write's input holds
// the file): the follower hands out no longer line whole, so none is
// decided; it is published, and left to the agent's timeout.
const maxPromptBytes = follow.DefaultMaxLine + 1

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

func holdMessage(ap protocol.Approval) string {
	return fmt.Sprintf("This request awaits a person's approval (baton approval %s of run %s). Do not retry it now: "+
		"you will be told in a new message when it is approved. Go on with other work, or end your turn.", ap.ID, ap.RunID)
}

func followUpText(ap protocol.Approval) string {
	what := ap.Tool
	if ap.Target != "" {
		what += " (" + ap.Target + ")"
	}
	return fmt.Sprintf("Your earlier request to use %s was approved by %s. Please retry it now.", what, ap.DecidedBy)
}

// notice publishes ap on its run's notice subject (core NATS: a client
// that missed it reads the bucket).
func (a *approver) notice(ap protocol.Approval) {
	b, err := json.Marshal(ap)
	if err == nil {
		err = a.w.nc.Publish(a.w.names.ApprovalNoticeSubject(a.r.id), b)
	}
	if err != nil {
		a.r.log.Debug().Err(err).Msg("publish an approval notice")
	}
}

// isPrompt reports whether l is a permission prompt of a run with a
// policy. Every line of such a run passes the reader, which keeps what
// later prompts refer to.
func (r *run) isPrompt(l follow.Line) bool {
	if r.approver == nil || l.Data == nil {
		return false
	}
	r.approver.reader.Observe(l.Data)
	if !policy.MayBeRequest(l.Data) {
		return false
	}
	_, ok := r.approver.reader.Request(l.Data)
	return ok
}

// grantRule prefixes the rule of a prompt allowed because a person
// allowed the same tool and target after a hold: the agent's retry.
const grantRule = "approved: "

// publishPrompt records the approval of the prompt l (the policy's
// decision, or pending), then publishes l with its approval id, verdict
// and rule. A successor that publishes l again finds the record.
func (a *approver) publishPrompt(ctx context.Context, l follow.Line) error {
	req, _ := a.reader.Request(l.Data)
	select {
	case <-a.synced:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(approvalTimeout):
		// The records are not known yet: a retry of a prompt the agent
		// was allowed after a hold is asked again.
		a.r.log.Warn().Msg("the run's approvals were not read in time; deciding the prompt by the policy alone")
	}
	rec := a.decide(ctx, req, l)
	ap, err := a.record(ctx, protocol.ApprovalKey(a.r.id, rec.ID), rec)
	if err == nil && ap.Offset != l.Start {
		// Another line took the id first: the agent printed a request id
		// again. Its record is not this prompt's (nor is its answer): this
		// one gets an id of its own, the same for a successor.
		rec.ID = reusedID(rec.ID, l.Start)
		ap, err = a.record(ctx, protocol.ApprovalKey(a.r.id, rec.ID), rec)
	}
	if err != nil {
		return err
	}
	h := nats.Header{}
	h.Set(protocol.HeaderApproval, ap.ID)
	h.Set(protocol.HeaderVerdict, ap.Verdict)
	h.Set(protocol.HeaderRule, ap.Rule)
	if err := a.r.chain.PublishLineWith(ctx, l.Data, l.End, h); err != nil {
		return err
	}
	a.w.metrics.approvals.WithLabelValues(ap.Verdict).Inc()
	if ap.Open() && !a.open[ap.ID] {
		// A person is asked: open until baton's input for it (an
		// answer, or a hold) is on the chain.
		a.open[ap.ID] = true
		a.w.metrics.approvalsPending.Inc()
	}
	return nil
}

// record creates the approval ap under key, or reads the one there (this
// prompt was recorded by a predecessor).
func (a *approver) record(ctx context.Context, key string, ap protocol.Approval) (protocol.Approval, error) {
	var err error
	for try := 0; try < 10; try++ {
		if try > 0 && !clock.Sleep(ctx, approvalRetry) {
			return ap, ctx.Err()
		}
		cctx, cancel := context.WithTimeout(ctx, approvalTimeout)
		_, err = a.w.approvals.Create(cctx, key, ap)
		if errors.Is(err, kv.ErrExists) {
			var got protocol.Approval
			got, _, err = a.w.approvals.Get(cctx, key)
			cancel()
			if err == nil {
				return got, nil
			}
			continue
		}
		cancel()
		if err == nil {
			return ap, nil
		}
		a.r.log.Warn().Err(err).Str("approval", ap.ID).Msg("record the prompt's approval; trying again")
	}
	return ap, fmt.Errorf("record approval %s: %w", ap.ID, err)
}

// tooLargeRule is the rule of a prompt whose allow would be an input over
// maxInputBytes.
const tooLargeRule = "deny: answer over maxInputBytes"

// reusedID is the approval id of a prompt at offset whose request id an
// earlier prompt of the run had (id its approval id).
func reusedID(id string, offset int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s@%d", id, offset))
	return "r" + hex.EncodeToString(sum[:8])
}

// Bounds of what a record keeps of a prompt (a Write's input holds the
// whole file): the answer is made from the journal's line, not from the
// record.
const (
	maxRecordedInput  = 16 << 10
	maxRecordedTarget = 4 << 10
)

// decide makes the approval record of the prompt req on line l.
func (a *approver) decide(ctx context.Context, req policy.Request, l follow.Line) protocol.Approval {
	now := time.Now().UTC()
	d := a.r.rec.Policy.Decide(req)
	ap := protocol.Approval{RunID: a.r.id, ID: req.ApprovalID(), Agent: req.Agent, Tool: req.Tool, Target: req.Target,
		Input: req.Input, Verdict: string(d.Verdict), Rule: d.Rule, State: protocol.ApprovalPending, AskedAt: now,
		Offset: l.Start, End: l.End}
	if len(ap.Input) > maxRecordedInput {
		ap.Input, ap.Truncated = nil, true
	}
	if len(ap.Target) > maxRecordedTarget {
		ap.Target, ap.Truncated = strings.ToValidUTF8(ap.Target[:maxRecordedTarget], ""), true
	}
	if n, limit := len(req.Answer(true, ""))+1, int(a.w.cfg.MaxInputBytes); n > limit && d.Verdict != policy.Deny {
		// Claude's allow carries the tool's input back (a Write's file):
		// an answer over maxInputBytes is no input baton can store.
		d = policy.Decision{Verdict: policy.Deny, Rule: tooLargeRule}
		ap.Verdict, ap.Rule = string(d.Verdict), d.Rule
		ap.State, ap.DecidedBy, ap.DecidedAt = protocol.ApprovalDenied, protocol.DecidedByPolicy, &now
		ap.Message = fmt.Sprintf("Denied: its answer would be %d bytes, over baton's maxInputBytes (%d). Make the request smaller (e.g. write the file in parts).", n, limit)
		return ap
	}
	if d.Verdict == policy.Ask {
		if g, ok := a.grant(ctx, req); ok {
			d = policy.Decision{Verdict: policy.Allow, Rule: grantRule + g.ID}
			ap.Verdict, ap.Rule = string(policy.Allow), d.Rule
			ap.State, ap.DecidedBy, ap.DecidedAt = protocol.ApprovalAllowed, g.DecidedBy, &now
			return ap
		}
	}
	switch d.Verdict {
	case policy.Allow:
		ap.State, ap.DecidedBy, ap.DecidedAt = protocol.ApprovalAllowed, protocol.DecidedByPolicy, &now
	case policy.Deny:
		ap.State, ap.DecidedBy, ap.DecidedAt = protocol.ApprovalDenied, protocol.DecidedByPolicy, &now
		ap.Message = "Denied by baton's policy (" + d.Rule + ")."
	}
	return ap
}

// grant finds a person's allow, after a hold, of the same tool and
// target as req in this run, or in its session's earlier runs (the
// follow-up of a paused run's hold starts the next one): req is the
// agent's retry.
func (a *approver) grant(ctx context.Context, req policy.Request) (protocol.Approval, bool) {
	match := func(ap protocol.Approval) bool {
		return ap.State == protocol.ApprovalAllowed && ap.HeldAt != nil && ap.DecidedBy != protocol.DecidedByPolicy && !ap.Truncated &&
			ap.Agent == req.Agent && ap.Tool == req.Tool && ap.Target == req.Target
	}
	a.mu.Lock()
	for _, ap := range a.all {
		if match(ap) {
			a.mu.Unlock()
			return ap, true
		}
	}
	a.mu.Unlock()
	if a.r.rec.Session == "" {
		return protocol.Approval{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	sess, _, err := a.w.sessions.Get(ctx, a.r.rec.Session)
	if err != nil {
		a.r.log.Warn().Err(err).Msg("read the session's runs for an approval given in an earlier one")
		return protocol.Approval{}, false
	}
	// The latest runs: a follow-up starts the run right after its hold's.
	runs := sess.Runs[max(len(sess.Runs)-sessionGrantRuns, 0):]
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i] == a.r.id {
			continue
		}
		aps, err := a.w.listApprovals(ctx, protocol.ApprovalKeys(runs[i]))
		if err != nil {
			a.r.log.Warn().Err(err).Str("session_run", runs[i]).Msg("read an earlier run's approvals")
			continue
		}
		for _, ap := range aps {
			if match(ap) {
				return ap, true
			}
		}
	}
	return protocol.Approval{}, false
}

// sessionGrantRuns bounds the earlier runs of a session whose approvals
// answer a retry.
const sessionGrantRuns = 8

// handleApprove answers an approve request: a compare-and-set on the
// approval's record from pending to the person's decision, which the
// run's holder then writes to the agent. A second answer gets
// ApprovalConflict, saying who decided.
func (w *Worker) handleApprove(ctx context.Context, req micro.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), approvalTimeout)
	defer cancel()
	runID := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]
	if !protocol.ValidRunID(runID) {
		_ = req.Error(protocol.ApprovalBad, fmt.Sprintf("runId %q must match [A-Za-z0-9_-]{1,128}", runID), nil)
		return
	}
	var body protocol.ApproveRequest
	if err := json.Unmarshal(req.Data(), &body); err != nil {
		_ = req.Error(protocol.ApprovalBad, "the body is not an approve request: "+err.Error(), nil)
		return
	}
	if !protocol.ValidApprovalID(body.ID) {
		_ = req.Error(protocol.ApprovalBad, fmt.Sprintf("approval id %q must match [A-Za-z0-9_-]{1,64}", body.ID), nil)
		return
	}
	by := strings.TrimSpace(body.By)
	switch {
	case by == "":
		by = "human"
	case by == protocol.DecidedByPolicy || by == protocol.DecidedByTimeout || len(by) > 128:
		_ = req.Error(protocol.ApprovalBad, fmt.Sprintf("by %q: a person's name of at most 128 bytes, not %q or %q", by, protocol.DecidedByPolicy, protocol.DecidedByTimeout), nil)
		return
	}
	rec, _, err := w.runs.Get(ctx, runID)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		_ = req.Error(protocol.ApprovalNotFound, "no run "+runID, nil)
		return
	case err != nil:
		_ = req.Error(protocol.ApprovalFailed, "cannot read the run's record: "+err.Error(), nil)
		return
	case rec.State.Terminal() && !pausedInSession(rec):
		_ = req.Error(protocol.ApprovalGone, fmt.Sprintf("run %s is %s: nothing waits on the answer", runID, rec.State), nil)
		return
	}
	var before protocol.Approval
	ap, _, err := w.approvals.Modify(ctx, protocol.ApprovalKey(runID, body.ID), func(ap *protocol.Approval) error {
		if ap.State != protocol.ApprovalPending {
			before = *ap
			return errDecided
		}
		now := time.Now().UTC()
		ap.State, ap.DecidedBy, ap.DecidedAt = protocol.ApprovalDenied, by, &now
		if body.Allow {
			ap.State = protocol.ApprovalAllowed
		} else {
			ap.Message = body.Message
			if ap.Message == "" {
				ap.Message = "Denied by " + by + "."
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, kv.ErrNotFound):
		_ = req.Error(protocol.ApprovalNotFound, fmt.Sprintf("run %s has no approval %s", runID, body.ID), nil)
		return
	case errors.Is(err, errDecided):
		when := ""
		if before.DecidedAt != nil {
			when = " at " + before.DecidedAt.Format(time.RFC3339)
		}
		_ = req.Error(protocol.ApprovalConflict, fmt.Sprintf("approval %s of run %s was %s by %s%s", body.ID, runID, before.State, before.DecidedBy, when), nil)
		return
	case err != nil:
		_ = req.Error(protocol.ApprovalFailed, "cannot write the approval: "+err.Error(), nil)
		return
	}
	// The run may have paused while this answer was given: its holder's
	// last look at its approvals (followUpPaused) came before the answer,
	// or this read of its record after it tells. Both may send: the
	// follow-up's message id makes it one run.
	if !pausedInSession(rec) {
		if now, _, err := w.runs.Get(ctx, runID); err == nil {
			rec = now
		}
	}
	if pausedInSession(rec) {
		if err := w.followUpSession(ctx, rec, ap); err != nil {
			_ = req.Error(protocol.ApprovalFailed, "the approval is recorded, but its follow-up turn could not be sent to the session: "+err.Error(), nil)
			return
		}
	}
	b, _ := json.Marshal(ap)
	_ = req.Respond(b)
}

// followUpPaused, once r paused (its record says so), sends the session
// the follow-up of each request r held that a person allowed meanwhile
// and that r's agent was not told of.
func (a *approver) followUpPaused(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	aps, err := a.w.listApprovals(ctx, protocol.ApprovalKeys(a.r.id))
	if err != nil {
		a.r.log.Warn().Err(err).Msg("read the paused run's approvals for follow-ups")
		return
	}
	for _, ap := range aps {
		if ap.AnswerSeq != 0 {
			continue
		}
		if err := a.w.followUpSession(ctx, a.r.rec, ap); err != nil {
			a.r.log.Warn().Err(err).Str("approval", ap.ID).Msg("send the session the follow-up of an approval")
		}
	}
}

// pausedInSession reports whether rec's run is a session's, paused: an
// approval it held is answered by the session's next run.
func pausedInSession(rec kv.RunRecord) bool {
	return rec.Session != "" && protocol.StatusType(rec.State) == protocol.StatusPaused
}

// followUpSession sends the follow-up turn of ap, a held request of a
// paused session's run that a person allowed, to the session: its next
// run starts with it, and the agent's retry there is allowed by ap (grant).
// A Codex follow-up names its thread, which only the run knew: it is not
// sent.
func (w *Worker) followUpSession(ctx context.Context, rec kv.RunRecord, ap protocol.Approval) error {
	if ap.State != protocol.ApprovalAllowed || ap.HeldAt == nil || ap.Agent != policy.Claude {
		return nil
	}
	line := append(policy.Request{Agent: ap.Agent}.FollowUp(followUpText(ap)), '\n')
	_, err := w.sendToSession(ctx, ctx, rec.Session, line, false, protocol.FollowUpMsgID(ap.RunID, ap.ID))
	return err
}

// maxApprovalsListed bounds one read of approvals.
const maxApprovalsListed = 1000

// handleReadApprovals lists approval records (protocol.ApprovalsQuery):
// a run's, or every run's; pending ones of ended runs are left out of a
// pending list (nothing waits on them).
func (w *Worker) handleReadApprovals(ctx context.Context, req micro.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), approvalTimeout)
	defer cancel()
	var q protocol.ApprovalsQuery
	if len(req.Data()) > 0 {
		if err := json.Unmarshal(req.Data(), &q); err != nil {
			_ = req.Error(protocol.ApprovalBad, "the body is not an approvals query: "+err.Error(), nil)
			return
		}
	}
	if q.RunID != "" && !protocol.ValidRunID(q.RunID) {
		_ = req.Error(protocol.ApprovalBad, fmt.Sprintf("runId %q must match [A-Za-z0-9_-]{1,128}", q.RunID), nil)
		return
	}
	limit := q.Limit
	if limit <= 0 || limit > maxApprovalsListed {
		limit = maxApprovalsListed
	}
	filter := ">"
	if q.RunID != "" {
		filter = protocol.ApprovalKeys(q.RunID)
	}
	all, err := w.listApprovals(ctx, filter)
	if err != nil {
		_ = req.Error(protocol.ApprovalFailed, "cannot read the approvals: "+err.Error(), nil)
		return
	}
	out := protocol.ApprovalsReply{Approvals: []protocol.Approval{}}
	ended := map[string]bool{}
	for _, ap := range all {
		if q.Pending {
			if ap.State != protocol.ApprovalPending {
				continue
			}
			e, seen := ended[ap.RunID]
			if !seen {
				rec, _, err := w.runs.Get(ctx, ap.RunID)
				e = errors.Is(err, kv.ErrNotFound) || err == nil && rec.State.Terminal()
				ended[ap.RunID] = e
			}
			if e {
				continue
			}
		}
		out.Approvals = append(out.Approvals, ap)
	}
	slices.SortFunc(out.Approvals, func(x, y protocol.Approval) int { return x.AskedAt.Compare(y.AskedAt) })
	if len(out.Approvals) > limit {
		out.Approvals, out.Truncated = out.Approvals[len(out.Approvals)-limit:], true
	}
	b, _ := json.Marshal(out)
	_ = req.Respond(b)
}

// listApprovals reads the approval records whose keys match filter. The
// keys come from the stream's subjects, not from a watch: a watch's first
// values leave out a key whose record is being written meanwhile (with
// one revision kept, the one it would deliver is gone), which a list
// just after an answer (the holder then records what it wrote) would
// miss.
func (w *Worker) listApprovals(ctx context.Context, filter string) ([]protocol.Approval, error) {
	bucket := w.approvals.KV().Bucket()
	stream, err := w.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+filter))
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Approval, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		ap, _, err := w.approvals.Get(ctx, strings.TrimPrefix(subj, prefix))
		switch {
		case errors.Is(err, kv.ErrNotFound):
			// Deleted (its marker is a subject too).
		case errors.Is(err, kv.ErrDecode):
			w.log.Warn().Err(err).Msg("an approval record that cannot be decoded")
		case err != nil:
			return nil, err
		default:
			out = append(out, ap)
		}
	}
	return out, nil
}
