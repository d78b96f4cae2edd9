package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// The AG-UI endpoints serve a run's chain as AG-UI events (package agui)
// over server-sent events, each with its position as id, so an
// EventSource, @ag-ui/client's HttpAgent and @tanstack/ai-client's
// fetchServerSentEvents all read it and resume it with Last-Event-ID:
//
//	GET  /api/runs/{id}/agui   the whole run, every turn; id "<seq>:<index>"
//	POST /api/agui             an AG-UI RunAgentInput: the thread is a
//	                           session, its last user message the session's
//	                           next message; answered with that turn only;
//	                           id "<runId>/<seq>:<index>"
//	GET  /api/agui?runId=R     a join: the run's stream, as the first GET
//
// A POST whose resume answers the interrupts a turn ended with (a
// permission prompt the run's policy asks a person about, package agui)
// sends no message: each entry is an approve request for its approval,
// and the answer is the turn the agent goes on with.

// errTurnDone ends a watch whose response carried its turn's end.
var errTurnDone = errors.New("the turn is over")

// aguiStream says which part of a run's projection a response carries.
type aguiStream struct {
	runID string
	after agui.Position // resume after it (when resume is set)
	// resume: after is the client's Last-Event-ID.
	resume bool
	// input, when not zero, starts the response at the AG-UI run (the
	// turn) that holds the run's input of this Baton-Input-Seq.
	input uint64
	// oneTurn ends the response after the first RUN_FINISHED or RUN_ERROR.
	oneTurn bool
	// approvals, when not nil, start the response at the AG-UI run (the
	// turn) open when the last of these approvals' answers went in to
	// the agent (a decision input not by the timeout, or a follow-up).
	approvals map[string]bool
	// noUserEcho leaves out user messages: the client that sent them has
	// them already.
	noUserEcho bool
	// idPrefix comes before each event's position in its SSE id.
	idPrefix string
}

// serveRunAGUI streams run {id} as AG-UI events, from its start or after
// the Last-Event-ID (or ?after=) position, to the end of the run.
func (c *Console) serveRunAGUI(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	st := aguiStream{runID: id}
	if !st.readAfter(w, r) {
		return
	}
	c.streamAGUI(w, r, st)
}

// readAfter reads the resume point: Last-Event-ID, else ?after=.
func (st *aguiStream) readAfter(w http.ResponseWriter, r *http.Request) bool {
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if after == "" {
		return true
	}
	pos, err := agui.ParsePosition(after)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("after (or Last-Event-ID): %w", err))
		return false
	}
	st.after, st.resume = pos, true
	return true
}

// serveAGUIJoin is TanStack AI's joinRun (GET ?runId=R&offset=-1): run
// R's stream from its start, as serveRunAGUI gives it.
func (c *Console) serveAGUIJoin(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("runId")
	if !protocol.ValidRunID(id) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: runId %q", protocol.ErrBadRunID, id))
		return
	}
	st := aguiStream{runID: id}
	if !st.readAfter(w, r) {
		return
	}
	c.streamAGUI(w, r, st)
}

// runAgentInput is the part of an AG-UI RunAgentInput baton reads.
type runAgentInput struct {
	ThreadID       string         `json:"threadId"`
	RunID          string         `json:"runId"`
	Messages       []inputMessage `json:"messages"`
	ForwardedProps struct {
		Profile string `json:"profile"`
		Input   string `json:"input"`
		// By names who answers the resume's approvals (else "agui").
		By string `json:"by"`
	} `json:"forwardedProps"`
	// Resume answers the interrupts the thread's last turn ended with.
	Resume []agui.ResumeEntry `json:"resume"`
}

type inputMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is the message's text: its content string, or its text parts
// joined.
func (m inputMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text, Content string
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text + p.Content)
		}
	}
	return b.String()
}

// Input formats of the AG-UI endpoint's messages (forwardedProps.input or
// ?input=).
const (
	inputText       = "text"
	inputStreamJSON = "stream-json"
)

// serveAGUIRun takes an AG-UI RunAgentInput: its threadId is a session,
// its last user message that session's next message (one per runId,
// however often the request is retried: the runId is the message's id),
// and answers with the turn the message starts, as AG-UI events. A new
// thread needs a profile (forwardedProps.profile or ?profile=). A retry
// with Last-Event-ID sends nothing and resumes the turn after it.
func (c *Console) serveAGUIRun(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, "a RunAgentInput")
	if !ok {
		return
	}
	var in runAgentInput
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("a RunAgentInput: %w", err))
		return
	}
	if !protocol.ValidSessionID(in.ThreadID) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: threadId %q names the session and must match [A-Za-z0-9_-]{1,128}", protocol.ErrInvalidJob, in.ThreadID))
		return
	}
	if in.RunID == "" {
		writeError(w, http.StatusBadRequest, errors.New("a RunAgentInput needs a runId: it is the message's id, so that a retry sends it once"))
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		c.resumeAGUIRun(w, r, in.ThreadID, last)
		return
	}
	if len(in.Resume) > 0 {
		c.answerAGUI(w, r, in)
		return
	}
	text := ""
	for i := len(in.Messages) - 1; i >= 0 && text == ""; i-- {
		if in.Messages[i].Role == "user" {
			text = in.Messages[i].text()
		}
	}
	if text == "" {
		writeError(w, http.StatusBadRequest, errors.New("a RunAgentInput needs a user message with text: it is the session's next message"))
		return
	}
	q := r.URL.Query()
	profile, format := in.ForwardedProps.Profile, in.ForwardedProps.Input
	if profile == "" {
		profile = q.Get("profile")
	}
	if format == "" {
		format = q.Get("input")
	}
	var input []byte
	switch format {
	case "", inputText:
		input = []byte(text)
	case inputStreamJSON:
		input = client.StreamJSONUserMessage(text)
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("input %q: want %s or %s", format, inputText, inputStreamJSON))
		return
	}
	st, err := c.sendAGUI(r.Context(), in.ThreadID, in.RunID, profile, input)
	if err != nil {
		if errors.Is(err, errNeedsProfile) {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		c.writeReply(w, nil, err)
		return
	}
	c.streamAGUI(w, r, st)
}

var errNeedsProfile = errors.New("a new thread needs a profile: forwardedProps.profile or ?profile=")

// sendAGUI gives input to session thread as message msgID, starting the
// session with a run of profile when there is none, and says which turn
// answers it.
func (c *Console) sendAGUI(ctx context.Context, thread, msgID, profile string, input []byte) (aguiStream, error) {
	st := aguiStream{oneTurn: true, noUserEcho: true}
	_, err := c.client.Session(ctx, thread)
	if errors.Is(err, client.ErrNotFound) {
		if profile == "" {
			return st, errNeedsProfile
		}
		st.runID = protocol.SessionRunID(thread, msgID)
		st.idPrefix = st.runID + "/"
		job := protocol.Job{RunID: st.runID, Profile: profile, Input: string(input)}
		return st, c.client.Submit(ctx, job, client.WithSession(thread))
	}
	if err != nil {
		return st, err
	}
	rep, err := c.client.SendSession(ctx, thread, input, client.WithMsgID(msgID))
	if err != nil {
		return st, err
	}
	st.runID, st.idPrefix = rep.RunID, rep.RunID+"/"
	if !rep.Started {
		st.input = rep.Seq
	}
	return st, nil
}

// resumeAGUIRun resumes a POST's turn after last ("<runId>/<position>"),
// a run of session thread.
func (c *Console) resumeAGUIRun(w http.ResponseWriter, r *http.Request, thread, last string) {
	i := strings.LastIndexByte(last, '/')
	pos, err := agui.ParsePosition(last[i+1:])
	if i < 0 || err != nil || !protocol.ValidRunID(last[:i]) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("Last-Event-ID %q: want <runId>/<seq>:<index>", last))
		return
	}
	runID := last[:i]
	rec, err := c.client.Run(r.Context(), runID)
	if err != nil {
		c.writeReply(w, nil, err)
		return
	}
	if rec.Session != thread {
		writeError(w, http.StatusBadRequest, fmt.Errorf("Last-Event-ID: run %s is not of thread %s", runID, thread))
		return
	}
	c.streamAGUI(w, r, aguiStream{runID: runID, after: pos, resume: true, oneTurn: true, noUserEcho: true, idPrefix: runID + "/"})
}

// streamAGUI writes st's events as server-sent events until its end
// (the run's terminal status, or its turn's end), the client's leaving,
// or a failure; a failure ends the response short of the end, and the
// client resumes with Last-Event-ID.
func (c *Console) streamAGUI(w http.ResponseWriter, r *http.Request, st aguiStream) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rec, err := c.client.AwaitRecord(ctx, st.runID)
	if errors.Is(err, client.ErrRejected) {
		writeError(w, http.StatusUnprocessableEntity, err) // the DLQ took the job: no run will come
		return
	}
	if err != nil {
		c.writeReply(w, nil, err)
		return
	}
	s, ok := newSSE(w)
	if !ok {
		return
	}
	out := &aguiWriter{sse: s, st: st, userMessages: map[string]bool{}}
	var opts []agui.Option
	if st.resume {
		opts = append(opts, agui.After(st.after))
	}
	p := client.NewProjector(rec, opts...)
	var pings sync.WaitGroup
	defer pings.Wait() // nothing writes once the handler returns
	defer cancel()
	pings.Go(func() { out.ping(ctx, 15*time.Second) })
	_, err = c.client.Watch(ctx, st.runID, func(ev client.Event) error {
		return out.write(ev, p.Project(client.AGUIMessage(ev)))
	})
	if err != nil && !errors.Is(err, errTurnDone) && ctx.Err() == nil {
		out.comment("the stream ends short: " + err.Error())
	}
}

// aguiWriter writes one response's events.
type aguiWriter struct {
	mu  sync.Mutex
	sse *sse
	st  aguiStream
	// started: the response's first event is written (st.input found).
	started bool
	// pending holds, until st.input comes, the events of the AG-UI run
	// open before it.
	pending      []agui.Projected
	userMessages map[string]bool
}

// write writes the events ev gave.
func (a *aguiWriter) write(ev client.Event, events []agui.Projected) error {
	if a.st.input > 0 && !a.started {
		if ev.Kind != protocol.KindInput || ev.InputSeq != a.st.input {
			a.hold(events)
			return nil
		}
		events = append(a.pending, events...)
		a.pending = nil
	}
	if a.st.approvals != nil && !a.started {
		if !a.answers(ev) || len(a.st.approvals) > 0 {
			a.hold(events)
			return nil
		}
		events = append(a.pending, events...)
		a.pending = nil
	}
	a.started = true
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, pe := range events {
		if a.st.noUserEcho && a.userEcho(pe.Event) {
			continue
		}
		b, err := json.Marshal(pe.Event)
		if err != nil {
			return err
		}
		if err := a.sse.event(a.st.idPrefix+pe.Pos.String(), "", b); err != nil {
			return err
		}
		if a.st.oneTurn && (pe.Event.Type == agui.RunFinished || pe.Event.Type == agui.RunError) {
			a.sse.flush()
			return errTurnDone
		}
	}
	a.sse.flush()
	return nil
}

// hold keeps, until the response's start comes, the events of the AG-UI
// run open before it.
func (a *aguiWriter) hold(events []agui.Projected) {
	for _, pe := range events {
		switch pe.Event.Type {
		case agui.RunStarted:
			a.pending = append(a.pending[:0], pe)
		case agui.RunFinished, agui.RunError:
			a.pending = a.pending[:0]
		default:
			if len(a.pending) > 0 {
				a.pending = append(a.pending, pe)
			}
		}
	}
}

// answers reports whether ev is what went in to the agent for one of
// the approvals the response waits for (a hold by the timeout is not),
// and counts it.
func (a *aguiWriter) answers(ev client.Event) bool {
	if ev.Kind != protocol.KindInput || ev.Approval == "" || !a.st.approvals[ev.Approval] {
		return false
	}
	switch {
	case ev.InputKind == protocol.InputKindFollowUp,
		ev.InputKind == protocol.InputKindDecision && ev.DecidedBy != protocol.DecidedByTimeout:
		delete(a.st.approvals, ev.Approval)
		return true
	}
	return false
}

// userEcho reports whether e is part of a user's text message.
func (a *aguiWriter) userEcho(e agui.Event) bool {
	switch e.Type {
	case agui.TextMessageStart:
		if e.Role == "user" {
			a.userMessages[e.MessageID] = true
		}
	case agui.TextMessageContent, agui.TextMessageEnd:
	default:
		return false
	}
	return a.userMessages[e.MessageID]
}

// ping keeps a quiet response open through proxies.
func (a *aguiWriter) ping(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.comment("ping")
		}
	}
}

func (a *aguiWriter) comment(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.sse.comment(s)
}

// answerAGUI answers the interrupts a turn of thread in.ThreadID ended
// with: each of in.Resume is an approve request for its approval, sent
// once, to the thread's run that has it (the entry's metadata.runId, else
// the session's live or latest runs, newest first; a thread that is no
// session is a run's own id). The response is the turn the agent goes
// on with: in the run, from baton's answer; for a request a paused run
// held, the session's next run, which the follow-up starts. A refused
// answer (answered before, 409; the run ended, 410; no such approval,
// 404) is a RUN_ERROR whose code is the refusal's; a retry of the same
// answer by the same person is not refused.
func (c *Console) answerAGUI(w http.ResponseWriter, r *http.Request, in runAgentInput) {
	ctx := r.Context()
	by := in.ForwardedProps.By
	if by == "" {
		by = "agui"
	}
	reqs := make([]protocol.ApproveRequest, 0, len(in.Resume))
	for _, e := range in.Resume {
		req, err := e.Approval(by)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		reqs = append(reqs, req)
	}
	runs, err := c.threadRuns(ctx, in.ThreadID)
	if err != nil {
		c.writeReply(w, nil, err)
		return
	}
	var st *aguiStream
	for i, req := range reqs {
		runID := c.approvalRun(ctx, runs, in.Resume[i].RunID(), req.ID)
		opts := []client.ApproveOption{client.WithDecidedBy(req.By)}
		if !req.Allow {
			opts = append(opts, client.WithDeny(req.Message))
		}
		a, err := c.client.Approve(ctx, runID, req.ID, opts...)
		if errors.Is(err, client.ErrApprovalConflict) && sameAnswer(a, req) {
			err = nil // this very answer, sent again
		}
		if err != nil {
			if code := approveCode(err); code != "" {
				aguiFailure(w, code, err)
				return
			}
			c.writeReply(w, nil, err)
			return
		}
		switch next, paused := c.pausedFollowUp(ctx, runID, a); {
		case a.HeldAt != nil && !req.Allow:
			// The agent was told already that its request awaits
			// approval: a denial then writes nothing to it.
		case paused && next == "":
			// The follow-up went to no run this response can follow.
		case paused:
			st = &aguiStream{runID: next, oneTurn: true, noUserEcho: true, idPrefix: next + "/"}
		default:
			if st == nil || st.runID != runID || st.approvals == nil {
				st = &aguiStream{runID: runID, oneTurn: true, noUserEcho: true, idPrefix: runID + "/", approvals: map[string]bool{}}
			}
			st.approvals[req.ID] = true
		}
	}
	if st == nil {
		aguiFinished(w, in)
		return
	}
	c.streamAGUI(w, r, *st)
}

// threadRuns are the runs of an AG-UI thread whose interrupts a resume
// may answer, newest first: a session's live run and its latest ones; a
// thread that is no session is a run's own id.
func (c *Console) threadRuns(ctx context.Context, thread string) ([]string, error) {
	s, err := c.client.Session(ctx, thread)
	switch {
	case err == nil:
		var runs []string
		if s.Live != "" {
			runs = append(runs, s.Live)
		}
		for i := len(s.Runs) - 1; i >= 0 && len(runs) < maxResumeRuns; i-- {
			if s.Runs[i] != s.Live {
				runs = append(runs, s.Runs[i])
			}
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("%w: session %s has no run", client.ErrNotFound, thread)
		}
		return runs, nil
	case !errors.Is(err, client.ErrNotFound):
		return nil, err
	}
	if _, err := c.client.Run(ctx, thread); err != nil {
		return nil, err
	}
	return []string{thread}, nil
}

// maxResumeRuns bounds the runs of a session a resume looks in.
const maxResumeRuns = 8

// approvalRun is the run of runs whose approval id a resume answers:
// named, when it is one of them; else the newest where it is pending;
// else the newest that has it; else the newest.
func (c *Console) approvalRun(ctx context.Context, runs []string, named, id string) string {
	if named != "" && slices.Contains(runs, named) {
		return named
	}
	if len(runs) == 1 {
		return runs[0]
	}
	found := ""
	for _, run := range runs {
		a, err := c.client.Approval(ctx, run, id)
		if err != nil {
			continue
		}
		if a.State == protocol.ApprovalPending {
			return run
		}
		if found == "" {
			found = run
		}
	}
	if found != "" {
		return found
	}
	return runs[0]
}

// pausedFollowUp reports whether approval a, just allowed by a person
// after a hold, is of a session's run that paused: the worker then sends
// the follow-up turn to the session, and next is the run it starts (""
// when a live run of the session took it as input, or none is sent).
func (c *Console) pausedFollowUp(ctx context.Context, runID string, a protocol.Approval) (next string, paused bool) {
	if a.HeldAt == nil || a.State != protocol.ApprovalAllowed {
		return "", false
	}
	rec, err := c.client.Run(ctx, runID)
	if err != nil || rec.Session == "" || protocol.StatusType(rec.State) != protocol.StatusPaused {
		return "", false
	}
	if a.Agent != policy.Claude {
		return "", true // a Codex follow-up names the paused run's thread: none is sent
	}
	next = protocol.SessionRunID(rec.Session, protocol.FollowUpMsgID(runID, a.ID))
	if s, err := c.client.Session(ctx, rec.Session); err == nil && s.Live != "" && s.Live != next && s.Live != runID {
		return "", true // the session's live run took it as input
	}
	return next, true
}

// sameAnswer reports whether approval a, decided before, was decided as
// req answers it, by the same person: req is a retried request.
func sameAnswer(a protocol.Approval, req protocol.ApproveRequest) bool {
	state := protocol.ApprovalDenied
	if req.Allow {
		state = protocol.ApprovalAllowed
	}
	return a.ID == req.ID && a.State == state && a.DecidedBy == req.By
}

// approveCode is the refusal code of an approve request's error, "" for
// an error that is no refusal.
func approveCode(err error) string {
	switch {
	case errors.Is(err, client.ErrApprovalConflict):
		return protocol.ApprovalConflict
	case errors.Is(err, client.ErrRunEnded):
		return protocol.ApprovalGone
	case errors.Is(err, client.ErrApprovalNotFound):
		return protocol.ApprovalNotFound
	}
	return ""
}

// aguiFailure answers with an AG-UI stream of one RUN_ERROR (code: the
// approve request's refusal): the resume did not go through.
func aguiFailure(w http.ResponseWriter, code string, err error) {
	aguiEvents(w, agui.Event{Type: agui.RunError, Message: err.Error(), Code: code})
}

// aguiFinished answers with an AG-UI run that finishes at once: the
// resume was taken, and the agent has nothing to go on with.
func aguiFinished(w http.ResponseWriter, in runAgentInput) {
	aguiEvents(w,
		agui.Event{Type: agui.RunStarted, ThreadID: in.ThreadID, RunID: in.RunID},
		agui.Event{Type: agui.RunFinished, ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: agui.OutcomeSuccess}})
}

// aguiEvents writes evs as a response of server-sent events without ids
// (they are no positions of the run's projection).
func aguiEvents(w http.ResponseWriter, evs ...agui.Event) {
	s, ok := newSSE(w)
	if !ok {
		return
	}
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil || s.event("", "", b) != nil {
			return
		}
	}
	s.flush()
}
