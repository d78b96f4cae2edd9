package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// The sessions pages read through the workers' read relay, as the CLI
// does, and act through the workers' session service: the console holds
// no session state of its own.

func (c *Console) sessionID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !protocol.ValidSessionID(id) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: session %q must match [A-Za-z0-9_-]{1,128}", protocol.ErrInvalidJob, id))
		return "", false
	}
	return id, true
}

// serveSessions lists the sessions, the one used last first, with the
// ?label=K=V filters; records that cannot be decoded are named in errors
// beside the others.
func (c *Console) serveSessions(w http.ResponseWriter, r *http.Request) {
	want := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			writeError(w, http.StatusBadRequest, fmt.Errorf("label %q: want KEY=VALUE", l))
			return
		}
		want[k] = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	recs, err := c.client.Sessions(ctx, want)
	out := struct {
		Sessions []client.SessionView `json:"sessions"`
		Errors   []string             `json:"errors,omitempty"`
	}{Sessions: []client.SessionView{}}
	if err != nil && !errors.Is(err, kv.ErrDecode) {
		c.unavailable(w, err)
		return
	}
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	for _, rec := range recs {
		out.Sessions = append(out.Sessions, client.NewSessionView(rec))
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionInfo is a session's page: its view, and the states of its runs
// (those the run index holds), so the page lists them without a request
// per run.
type sessionInfo struct {
	Session  client.SessionView  `json:"session"`
	Runs     map[string]runBrief `json:"runs"`
	ReadOnly bool                `json:"readOnly"`
}

type runBrief struct {
	State      kv.RunState `json:"state"`
	Reason     string      `json:"reason,omitempty"`
	StartedAt  time.Time   `json:"startedAt,omitzero"`
	FinishedAt time.Time   `json:"finishedAt,omitzero"`
}

func (c *Console) serveSession(w http.ResponseWriter, r *http.Request) {
	id, ok := c.sessionID(w, r)
	if !ok {
		return
	}
	rec, err := c.client.Session(r.Context(), id)
	if err != nil {
		c.writeReply(w, nil, err)
		return
	}
	info := sessionInfo{Session: client.NewSessionView(rec), Runs: map[string]runBrief{}, ReadOnly: c.readOnly}
	for _, run := range rec.Runs {
		if got, found := c.index.get(run); found {
			info.Runs[run] = runBrief{State: got.State, Reason: got.Reason, StartedAt: got.StartedAt, FinishedAt: got.FinishedAt}
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// serveSessionSend sends the body to the session (client.SendSession): its
// live run gets it as input, a paused or idle session starts its next run
// with it. ?streamJson=1 wraps the text as a Claude stream-json user
// message (client.StreamJSONUserMessage); the request's X-Baton-Msg-Id,
// when given, makes a retried send start no second run.
func (c *Console) serveSessionSend(w http.ResponseWriter, r *http.Request) {
	id, ok := c.sessionID(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r, "input")
	if !ok {
		return
	}
	if r.URL.Query().Get("streamJson") == "1" {
		body = client.StreamJSONUserMessage(string(body))
	}
	var opts []client.SendOption
	if m := r.Header.Get("X-Baton-Msg-Id"); m != "" {
		opts = append(opts, client.WithMsgID(m))
	}
	rep, err := c.client.SendSession(r.Context(), id, body, opts...)
	c.writeReply(w, rep, err)
}

// serveSessionFork forks the session: the body is a
// protocol.SessionForkRequest, checked as the worker checks it.
func (c *Console) serveSessionFork(w http.ResponseWriter, r *http.Request) {
	id, ok := c.sessionID(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r, "a fork request")
	if !ok {
		return
	}
	req, err := protocol.DecodeSessionForkRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	v, err := c.client.ForkSession(r.Context(), id, req)
	c.writeReply(w, v, err)
}

func (c *Console) serveSessionDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := c.sessionID(w, r)
	if !ok {
		return
	}
	err := c.client.DeleteSession(r.Context(), id)
	c.writeReply(w, map[string]string{"deleted": id}, err)
}
