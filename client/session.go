package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

var (
	// ErrSessionExists: a fork's new session id is taken.
	ErrSessionExists = errors.New("client: session exists")
	// ErrSessionLive: the session has a live run (delete refuses it).
	ErrSessionLive = errors.New("client: session has a live run")
)

// SubmitOption configures Submit.
type SubmitOption func(*protocol.Job)

// WithSession makes the job's run one turn of session id (see
// protocol.Job.Session): it is submitted on the session's subject, where
// its runs start one at a time, in order.
func WithSession(id string) SubmitOption { return func(j *protocol.Job) { j.Session = id } }

// WithKey sets the job's concurrency key and priority (0: the default).
func WithKey(key string, priority int) SubmitOption {
	return func(j *protocol.Job) { j.ConcurrencyKey, j.Priority = key, priority }
}

// Session returns the record of session id, or an error wrapping
// ErrNotFound. It reads through the workers' read relay.
func (c *Client) Session(ctx context.Context, id string) (kv.SessionRecord, error) {
	if !protocol.ValidSessionID(id) {
		return kv.SessionRecord{}, fmt.Errorf("%w: session %q must match [A-Za-z0-9_-]{1,128}", protocol.ErrInvalidJob, id)
	}
	rec, err := getRecord[kv.SessionRecord](ctx, c, c.names.ReadSessionSubject(id), id, "session "+id, "session "+id)
	if err != nil {
		return rec, err
	}
	if rec.Deleted {
		return kv.SessionRecord{}, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	return rec, nil
}

// Sessions returns every session, the one used last first; labels, when
// given, keep only the sessions carrying each of them. Records that
// cannot be decoded are left out and reported in an error wrapping
// kv.ErrDecode, which comes with the others.
func (c *Client) Sessions(ctx context.Context, labels map[string]string) ([]kv.SessionRecord, error) {
	prefix := "$KV." + c.names.SessionsBucket() + "."
	latest := map[string]stored{}
	err := c.pages(ctx, c.names.ReadSessionsSubject(), 1, "", func(s stored) error {
		latest[strings.TrimPrefix(s.subject, prefix)] = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	var out []kv.SessionRecord
	var bad []error
	for id, s := range latest {
		if isDeleted(s.header) {
			continue
		}
		rec, err := kv.Decode[kv.SessionRecord](id, s.seq, s.data)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if rec.Deleted || !hasLabels(rec.Labels, labels) {
			continue
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b kv.SessionRecord) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, errors.Join(bad...)
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// SendSession sends text to session id: its live run gets it as input
// (its profile must have stdin "stream"), and a session with no live run
// (paused, or idle) starts its next run with text as the job's input. A
// retried send with the same msgID (WithMsgID) starts no second run and
// stores no second input. Errors are Send's, and ErrNotFound for no such
// session.
func (c *Client) SendSession(ctx context.Context, id string, text []byte, opts ...SendOption) (protocol.SessionSendReply, error) {
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	m := nats.NewMsg(c.names.SessionSendSubject(id))
	m.Data = text
	if o.msgID != "" {
		m.Header.Set(nats.MsgIdHdr, o.msgID)
	}
	if o.eof {
		m.Header.Set(protocol.HeaderInputEOF, "true")
	}
	var rep protocol.SessionSendReply
	err := c.sessionRequest(ctx, id, m, "send to session", &rep)
	return rep, err
}

// ForkSession makes a new session from a checkpoint of session id (the
// request names the new id, the checkpoint — its head when nil — and
// labels to add), without copying it. It returns the new session, or an
// error wrapping ErrNotFound (no such session or checkpoint) or
// ErrSessionExists.
func (c *Client) ForkSession(ctx context.Context, id string, req protocol.SessionForkRequest) (SessionView, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return SessionView{}, err
	}
	m := nats.NewMsg(c.names.SessionForkSubject(id))
	m.Data = body
	var v SessionView
	err = c.sessionRequest(ctx, id, m, "fork session", &v)
	return v, err
}

// DeleteSession deletes session id and the checkpoints only it uses. A
// session with a live run is refused (ErrSessionLive: cancel the run
// first).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.sessionRequest(ctx, id, nats.NewMsg(c.names.SessionDeleteSubject(id)), "delete session", nil)
}

// sessionRequest sends a session request and decodes its answer into out
// (JSON; nil: none).
func (c *Client) sessionRequest(ctx context.Context, id string, m *nats.Msg, what string, out any) error {
	if !protocol.ValidSessionID(id) {
		return fmt.Errorf("%s %q: %w: a session id must match [A-Za-z0-9_-]{1,128}", what, id, protocol.ErrInvalidJob)
	}
	msg, err := c.request(ctx, m, what+" "+id)
	if err != nil {
		return err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		switch code {
		case protocol.SessionNotFound:
			return fmt.Errorf("%w: %s", ErrNotFound, desc)
		case protocol.SessionExists:
			return fmt.Errorf("%w: %s", ErrSessionExists, desc)
		case protocol.SessionLive:
			return fmt.Errorf("%w: %s", ErrSessionLive, desc)
		case protocol.InputNotStream:
			return fmt.Errorf("%w: %s", ErrNoInput, desc)
		case protocol.InputTooLarge:
			return fmt.Errorf("%w: %s", ErrTooLarge, desc)
		}
		return fmt.Errorf("%s %s: refused (%s): %s", what, id, code, desc)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s %s: unreadable answer %q: %w", what, id, msg.Data, err)
	}
	return nil
}
