package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/session"
)

// addSessionEndpoints registers the session requests (protocol/session.go)
// on the worker's service: one worker of the queue group answers each.
func (w *Worker) addSessionEndpoints(ctx context.Context, svc micro.Service) error {
	for op, h := range map[string]func(context.Context, micro.Request, string){
		"send": w.handleSessionSend, "fork": w.handleSessionFork, "delete": w.handleSessionDelete,
	} {
		handler := micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
			id, ok := w.names.ParseSessionSubject(op, req.Subject())
			if !ok {
				_ = req.Error(protocol.SessionBad, "a session id must match [A-Za-z0-9_-]{1,128}", nil)
				return
			}
			h(ctx, req, id)
		})
		if err := svc.AddEndpoint("session-"+op, w.answerable("session-"+op, false, handler),
			micro.WithEndpointSubject(w.names.SessionRequests(op))); err != nil {
			return err
		}
	}
	return nil
}

// sessionError answers req with the session error code of err.
func sessionError(req micro.Request, err error) {
	code := protocol.SessionFailed
	switch {
	case errors.Is(err, session.ErrNotFound):
		code = protocol.SessionNotFound
	case errors.Is(err, session.ErrExists):
		code = protocol.SessionExists
	case errors.Is(err, session.ErrLive):
		code = protocol.SessionLive
	}
	_ = req.Error(code, err.Error(), nil)
}

// handleSessionSend gives a message to session id's agent: its live run
// takes it as input when it can (stdin "stream", not ending or pausing),
// else it is the input of the session's next run, submitted on the
// session's subject, where it starts once the live run (if any) ended. A
// request's Nats-Msg-Id names that run, so a retried send starts nothing
// twice.
func (w *Worker) handleSessionSend(ctx context.Context, req micro.Request, id string) {
	if n := len(req.Data()); n > int(w.cfg.MaxInputBytes) {
		_ = req.Error(protocol.InputTooLarge, fmt.Sprintf("a message of %d bytes is over maxInputBytes (%d)", n, w.cfg.MaxInputBytes), nil)
		return
	}
	life := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inputTimeout)
	defer cancel()
	eof := req.Headers().Get(protocol.HeaderInputEOF) == "true"
	rep, err := w.sendToSession(ctx, life, id, req.Data(), eof, req.Headers().Get(nats.MsgIdHdr))
	var refused *inputRefusal
	switch {
	case errors.As(err, &refused):
		_ = req.Error(refused.code, refused.desc, nil)
		return
	case errors.Is(err, errBadJob):
		_ = req.Error(protocol.SessionBad, err.Error(), nil)
		return
	case err != nil:
		sessionError(req, err)
		return
	}
	b, _ := json.Marshal(rep)
	_ = req.Respond(b)
}

// inputRefusal is an input error code and its description.
type inputRefusal struct{ code, desc string }

func (e *inputRefusal) Error() string { return e.code + " " + e.desc }

// errBadJob: the session's next job cannot be encoded.
var errBadJob = errors.New("the session's next job")

// sendToSession gives data to session id's agent (see handleSessionSend):
// as input of its live run, or as the first input of its next run.
func (w *Worker) sendToSession(ctx, life context.Context, id string, data []byte, eof bool, msgID string) (protocol.SessionSendReply, error) {
	rec, _, err := w.sessions.Get(ctx, id)
	if err != nil {
		return protocol.SessionSendReply{}, err
	}
	runID := protocol.SessionRunID(id, msgID)
	if msgID != "" && slices.Contains(rec.Runs, runID) {
		// A retry of a send that started a run: that run has the message.
		return protocol.SessionSendReply{Session: id, RunID: runID, Started: true}, nil
	}
	if rec.Live != "" {
		live, err := w.lookupRun(ctx, rec.Live)
		if err != nil {
			return protocol.SessionSendReply{}, err
		}
		if live != nil && !live.State.Terminal() && live.Interactive && !live.PauseRequested {
			seq, code, desc := w.acceptInput(ctx, life, rec.Live, *live, data, eof, msgID)
			if code == "" {
				return protocol.SessionSendReply{Session: id, RunID: rec.Live, Seq: seq}, nil
			}
			if code != protocol.InputTerminal {
				return protocol.SessionSendReply{}, &inputRefusal{code, desc}
			}
			// It ended meanwhile: the message starts the next run.
		}
	}
	job := protocol.Job{RunID: runID, Profile: rec.Profile, Input: string(data), Session: id}
	body, err := protocol.EncodeJob(job)
	if err != nil {
		return protocol.SessionSendReply{}, fmt.Errorf("%w: %w", errBadJob, err)
	}
	m := nats.NewMsg(w.names.SessionJobSubject(id))
	m.Data = body
	m.Header.Set(nats.MsgIdHdr, job.RunID)
	if _, err := w.js.PublishMsg(ctx, m, jetstream.WithExpectStream(w.names.JobsStream())); err != nil {
		return protocol.SessionSendReply{}, fmt.Errorf("submit the session's next run: %w", err)
	}
	return protocol.SessionSendReply{Session: id, RunID: job.RunID, Started: true}, nil
}

// handleSessionFork makes a new session from a checkpoint of id.
func (w *Worker) handleSessionFork(ctx context.Context, req micro.Request, id string) {
	fr, err := protocol.DecodeSessionForkRequest(req.Data())
	if err != nil {
		_ = req.Error(protocol.SessionBad, err.Error(), nil)
		return
	}
	n := -1
	if fr.Checkpoint != nil {
		n = *fr.Checkpoint
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inputTimeout)
	defer cancel()
	rec, err := w.sessions.Fork(ctx, id, n, fr.As, fr.Labels)
	if err != nil {
		sessionError(req, err)
		return
	}
	w.log.Info().Str("session", fr.As).Str("from", id).Int("checkpoint", rec.ForkedFrom.Checkpoint).Msg("session forked")
	b, _ := json.Marshal(client.NewSessionView(rec))
	_ = req.Respond(b)
}

// handleSessionDelete deletes session id (not one with a live run).
func (w *Worker) handleSessionDelete(ctx context.Context, req micro.Request, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inputTimeout)
	defer cancel()
	if err := w.sessions.Delete(ctx, id); err != nil {
		sessionError(req, err)
		return
	}
	w.log.Info().Str("session", id).Msg("session deleted")
	_ = req.Respond([]byte("{}"))
}
