package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

//go:embed assets
var assets embed.FS

// ErrNoToken means New was given neither a token nor WithoutAuth.
var ErrNoToken = errors.New("console: no token (use WithToken, or WithoutAuth behind your own auth)")

// TokenIssuer returns a NATS user JWT that lets a browser read one run (and,
// with input, write its input) for ttl; see package runtoken.
type TokenIssuer func(runID string, ttl time.Duration, input bool) (string, error)

// Console is the web console's http.Handler.
type Console struct {
	js          jetstream.JetStream
	names       protocol.Names
	client      *client.Client
	auth        auth
	noAuth      bool
	readOnly    bool
	issuer      TokenIssuer
	interactive func(kv.RunRecord) bool
	index       *runIndex
	rejections  *client.Rejections // a run page's run whose job the DLQ took
	handler     http.Handler
}

// Option configures a Console. An option given a value it cannot take
// makes New fail with an error wrapping ErrInvalidOption.
type Option func(*Console) error

// ErrInvalidOption: an option was given a value it cannot take.
var ErrInvalidOption = errors.New("console: invalid option")

// WithToken sets the token every request must carry (Authorization:
// Bearer, the session cookie set by ?token= or the login page).
func WithToken(token string) Option {
	return func(c *Console) error {
		if token == "" {
			return fmt.Errorf("%w: empty token (WithoutAuth serves without one)", ErrInvalidOption)
		}
		c.auth.token = token
		return nil
	}
}

// WithoutAuth serves without a token, for an application that puts its own
// auth in front of the handler.
func WithoutAuth() Option { return func(c *Console) error { c.noAuth = true; return nil } }

// WithReadOnly hides cancel, input, re-run, the approvals' Allow and Deny
// and the dead letters' retry and delete, and refuses them.
func WithReadOnly() Option { return func(c *Console) error { c.readOnly = true; return nil } }

// WithSecureCookie marks the session cookie Secure: set it when the console
// is served over TLS.
func WithSecureCookie() Option { return func(c *Console) error { c.auth.secure = true; return nil } }

// WithSessionTTL sets how long a browser stays logged in after it gave the
// token (default DefaultSessionTTL); POST logout ends a session sooner.
func WithSessionTTL(d time.Duration) Option {
	return func(c *Console) error {
		if d <= 0 {
			return fmt.Errorf("%w: session TTL %v must be positive", ErrInvalidOption, d)
		}
		c.auth.ttl = d
		return nil
	}
}

// WithBasePath tells the console the path it is mounted at (default "/"),
// for its redirects and cookie; strip it before the handler
// (http.StripPrefix).
func WithBasePath(p string) Option {
	return func(c *Console) error {
		p := strings.Trim(p, "/")
		if strings.ContainsAny(p, "?#\\") || slices.Contains(strings.Split(p, "/"), "..") {
			return fmt.Errorf("%w: base path %q must be a plain URL path", ErrInvalidOption, p)
		}
		c.auth.base = "/"
		if p != "" {
			c.auth.base = "/" + p + "/"
		}
		return nil
	}
}

// WithTokenIssuer lets the console hand out run-scoped NATS credentials
// (GET api/runs/{id}/token) to whoever passes its auth.
func WithTokenIssuer(fn TokenIssuer) Option {
	return func(c *Console) error {
		if fn == nil {
			return fmt.Errorf("%w: nil token issuer", ErrInvalidOption)
		}
		c.issuer = fn
		return nil
	}
}

// WithInteractive says which runs take input from the console's input box,
// from their record. Without it, a run takes input once its chain shows it
// waiting for input (a "waiting" status).
func WithInteractive(fn func(kv.RunRecord) bool) Option {
	return func(c *Console) error {
		if fn == nil {
			return fmt.Errorf("%w: nil interactive test", ErrInvalidOption)
		}
		c.interactive = fn
		return nil
	}
}

// New returns the console of the deployment js and names reach. It reads
// the run records in the background until ctx ends.
func New(ctx context.Context, js jetstream.JetStream, names protocol.Names, opts ...Option) (*Console, error) {
	cl, err := client.New(js, names)
	if err != nil {
		return nil, err
	}
	c := &Console{js: js, names: names, client: cl, index: newRunIndex(), rejections: cl.Rejections()}
	c.auth.base = "/"
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.auth.token == "" && !c.noAuth {
		return nil, ErrNoToken
	}
	if c.noAuth {
		c.auth.token = ""
	}
	c.auth = newAuth(c.auth.token, c.auth.secure, c.auth.base, c.auth.ttl)
	go c.index.follow(ctx, js, names.RunsBucket())

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, "assets/index.html") })
	mux.HandleFunc("GET /assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		serveAsset(w, r, "assets/"+r.PathValue("file"))
	})
	mux.HandleFunc("GET /api/config", c.serveConfig)
	mux.HandleFunc("GET /api/runs", c.serveRuns)
	mux.HandleFunc("GET /api/runs/live", c.serveRunsLive)
	mux.HandleFunc("GET /api/runs/{id}", c.serveRun)
	mux.HandleFunc("GET /api/runs/{id}/events", c.serveEvents)
	mux.HandleFunc("GET /api/runs/{id}/agui", c.serveRunAGUI)
	mux.HandleFunc("GET /api/agui", c.serveAGUIJoin)
	mux.HandleFunc("POST /api/agui", c.writes(c.needsNATS(c.serveAGUIRun)))
	mux.HandleFunc("POST /api/runs/{id}/cancel", c.writes(c.needsNATS(c.serveCancel)))
	mux.HandleFunc("POST /api/runs/{id}/input", c.writes(c.needsNATS(c.serveInput)))
	mux.HandleFunc("POST /api/runs/{id}/rerun", c.writes(c.needsNATS(c.serveRerun)))
	mux.HandleFunc("GET /api/runs/{id}/approvals", c.needsNATS(c.serveApprovals))
	mux.HandleFunc("POST /api/runs/{id}/approvals/{aid}", c.writes(c.needsNATS(c.serveApprove)))
	mux.HandleFunc("GET /api/runs/{id}/token", c.needsNATS(c.serveToken))
	mux.HandleFunc("GET /api/runs/{id}/outputs/{name...}", c.needsNATS(c.serveOutput))
	mux.HandleFunc("GET /api/sessions", c.needsNATS(c.serveSessions))
	mux.HandleFunc("GET /api/sessions/{id}", c.needsNATS(c.serveSession))
	mux.HandleFunc("POST /api/sessions/{id}/send", c.writes(c.needsNATS(c.serveSessionSend)))
	mux.HandleFunc("POST /api/sessions/{id}/fork", c.writes(c.needsNATS(c.serveSessionFork)))
	mux.HandleFunc("DELETE /api/sessions/{id}", c.writes(c.needsNATS(c.serveSessionDelete)))
	mux.HandleFunc("GET /api/workers", c.needsNATS(c.serveWorkers))
	mux.HandleFunc("GET /api/queue", c.needsNATS(c.serveQueue))
	mux.HandleFunc("GET /api/dlq", c.needsNATS(c.serveDLQ))
	mux.HandleFunc("POST /api/dlq/{seq}/retry", c.writes(c.needsNATS(c.serveDLQRetry)))
	mux.HandleFunc("DELETE /api/dlq/{seq}", c.writes(c.needsNATS(c.serveDLQDelete)))
	c.handler = c.auth.wrap(securityHeaders(mux))
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// securityHeaders keeps the console's pages from being framed or from
// loading anything but their own assets.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(assets, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// errNATSDown is what the pages show while the console's connection to
// NATS is down, in place of the error of whichever call the outage failed
// ("reading run records", "nats: timeout").
var errNATSDown = errors.New("NATS cannot be reached")

// natsDown returns errNATSDown, with the connection's last error, while
// the console's connection to NATS is not up (it keeps reconnecting); nil
// while it is.
func (c *Console) natsDown() error {
	nc := c.js.Conn()
	if nc.IsConnected() {
		return nil
	}
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("%w (the console keeps trying): %v", errNATSDown, err)
	}
	return fmt.Errorf("%w (the console keeps trying)", errNATSDown)
}

// writes refuses, on a read-only console, a request that changes a run, a
// session or a dead letter.
func (c *Console) writes(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.readOnly {
			writeError(w, http.StatusForbidden, errors.New("the console is read-only"))
			return
		}
		h(w, r)
	}
}

// needsNATS answers 503 at once while NATS cannot be reached, rather than
// let h's calls wait out their timeouts. Not for the runs list, served
// from memory, nor for the event streams: an EventSource answered 503
// never tries again.
func (c *Console) needsNATS(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := c.natsDown(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		h(w, r)
	}
}

// unavailable answers 503 with err, or with why NATS cannot be reached
// when it cannot: what err then comes from.
func (c *Console) unavailable(w http.ResponseWriter, err error) {
	if down := c.natsDown(); down != nil {
		err = down
	}
	writeError(w, http.StatusServiceUnavailable, err)
}

func (c *Console) serveConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"readOnly": c.readOnly, "tokens": c.issuer != nil, "prefix": c.names.Prefix(), "auth": c.auth.token != "",
	})
}

func (c *Console) serveRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > 500 {
		limit = 50
	}
	f := runFilter{State: q.Get("state"), Profile: q.Get("profile"), Node: q.Get("node"), Label: q.Get("label"), Query: q.Get("q")}
	p := c.index.list(f, offset, limit)
	if err := c.natsDown(); err != nil { // the runs shown are those read before the outage
		p.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, p)
}

// serveRunsLive tells the list page, over server-sent events, the version
// of the index after each change (at most ten times a second), so it
// reloads the page it shows; and when the connection to NATS goes down or
// comes back, so the page says so.
func (c *Console) serveRunsLive(w http.ResponseWriter, r *http.Request) {
	// Subscribed before the response starts, so no change made after the
	// client sees the stream open is missed.
	ch, cancel := c.index.subscribe()
	defer cancel()
	sse, ok := newSSE(w)
	if !ok {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	var sent uint64
	up := c.natsDown() == nil
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if sse.comment("ping") != nil {
				return
			}
		case <-tick.C:
			changed := false
			select {
			case <-ch:
				changed = true
			default:
			}
			c.index.mu.Lock()
			v := c.index.version
			c.index.mu.Unlock()
			wasUp := up
			up = c.natsDown() == nil
			if (!changed || v == sent) && up == wasUp {
				continue
			}
			sent = v
			if sse.event("", "changed", []byte(strconv.FormatUint(v, 10))) != nil {
				return
			}
			sse.flush()
		}
	}
}

func (c *Console) runID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !protocol.ValidRunID(id) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: %q", protocol.ErrBadRunID, id))
		return "", false
	}
	return id, true
}

// runInfo is the run page's header.
type runInfo struct {
	Run         client.RunView `json:"run"`
	ReadOnly    bool           `json:"readOnly"`
	Interactive bool           `json:"interactive"`
	Tokens      bool           `json:"tokens"`
	// Input is the start of the job's input (kv.InputPreview), the run's
	// first turn; Rerun, that the record keeps the job to run again.
	Input string `json:"input,omitempty"`
	Rerun bool   `json:"rerun"`
}

func (c *Console) serveRun(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	rec, found := c.index.get(id)
	if !found { // the index may lag a just-created record
		if err := c.natsDown(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		got, err := c.client.Run(r.Context(), id)
		if errors.Is(err, client.ErrNotFound) {
			// No record: its job may be in the dead-letter stream, where
			// the page would wait for ever.
			if e, rejected, rerr := c.rejections.Of(r.Context(), id, time.Time{}); rerr == nil && rejected {
				writeJSON(w, http.StatusNotFound, map[string]any{"rejected": true, "error": fmt.Sprintf(
					"run %s was rejected (%s): %s; it is on the Dead letters page", id, e.Reason, e.Error)})
				return
			}
			writeError(w, http.StatusNotFound, err)
			return
		}
		if err != nil {
			c.unavailable(w, err)
			return
		}
		rec = index(got)
	}
	writeJSON(w, http.StatusOK, runInfo{
		Run: client.NewRunView(rec.RunRecord), ReadOnly: c.readOnly, Tokens: c.issuer != nil,
		Interactive: rec.Interactive || (c.interactive != nil && c.interactive(rec.RunRecord)),
		Input:       rec.Input, Rerun: rec.keptJob,
	})
}

func (c *Console) serveCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	rep, err := c.client.Cancel(r.Context(), id)
	c.writeReply(w, rep, err)
}

// serveRerun submits the job of a run again under a new runId
// (client.Rerun), and answers with it.
func (c *Console) serveRerun(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	job, err := c.client.Rerun(r.Context(), id, protocol.NewRunID())
	if errors.Is(err, client.ErrNoJob) {
		writeError(w, http.StatusConflict, err)
		return
	}
	if err != nil {
		c.writeReply(w, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"runId": job.RunID})
}

// writeReply answers with a client call's reply, or with the HTTP status
// that its error means.
func (c *Console) writeReply(w http.ResponseWriter, rep any, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, rep)
	case errors.Is(err, client.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, client.ErrTerminal), errors.Is(err, client.ErrNoInput),
		errors.Is(err, client.ErrSessionExists), errors.Is(err, client.ErrSessionLive):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, client.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err)
	default:
		c.unavailable(w, err)
	}
}

// maxInput bounds one input message from the box, and any request's body.
const maxInput = 64 << 10

// readBody reads a request's body, what, of 1 to maxInput bytes; it
// answers 400 and reports false for any other.
func readBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInput+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return nil, false
	}
	if len(body) == 0 || len(body) > maxInput {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%s must be 1 to %d bytes, got %d", what, maxInput, len(body)))
		return nil, false
	}
	return body, true
}

// serveInput sends the body, as is, as one input message of the run
// (client.Send: the worker that answers checks the run and stores the
// message) and answers with the message's sequence in the input stream.
func (c *Console) serveInput(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r, "input")
	if !ok {
		return
	}
	rep, err := c.client.Send(r.Context(), id, body)
	c.writeReply(w, rep, err)
}

func (c *Console) serveToken(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	if c.issuer == nil {
		writeError(w, http.StatusNotFound, errors.New("this console issues no run tokens (start it with an account signing key)"))
		return
	}
	input := r.URL.Query().Get("input") == "1"
	if input && c.readOnly {
		writeError(w, http.StatusForbidden, errors.New("the console is read-only: no input tokens"))
		return
	}
	ttl := 15 * time.Minute
	if s := r.URL.Query().Get("ttl"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > 24*time.Hour {
			writeError(w, http.StatusBadRequest, fmt.Errorf("ttl %q: want a duration up to 24h", s))
			return
		}
		ttl = d
	}
	// Only for a run that exists: a token names an identity whose inbox
	// must be no one else's (F1), and there is nothing to watch yet.
	if _, found := c.index.get(id); !found {
		if _, err := c.client.Run(r.Context(), id); errors.Is(err, client.ErrNotFound) {
			writeError(w, http.StatusNotFound, err)
			return
		} else if err != nil {
			c.unavailable(w, err)
			return
		}
	}
	tok, err := c.issuer(id, ttl, input)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jwt": tok, "expires": time.Now().Add(ttl).UTC()})
}

// serveOutput streams one of a run's outputs from the outputs object store
// (its terminal status lists them), named "<runId>/<name>" there, through
// the workers' read relay.
func (c *Console) serveOutput(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if name == "" || strings.Contains(name, "..") {
		writeError(w, http.StatusBadRequest, fmt.Errorf("bad output name %q", name))
		return
	}
	// Statuses name outputs "<runId>/...", and the page links those names;
	// a name without the run's prefix is taken as relative to it.
	o, err := c.client.StoredOutput(r.Context(), id+"/"+strings.TrimPrefix(name, id+"/"))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		writeError(w, http.StatusNotFound, fmt.Errorf("run %s has no output %q", id, name))
		return
	}
	if err != nil {
		c.unavailable(w, err)
		return
	}
	base := name[strings.LastIndexByte(name, '/')+1:]
	w.Header().Set("Content-Length", strconv.FormatUint(o.Size, 10))
	// A file is named by its path's digest; it downloads as its path's
	// last segment (escaped, as the status lists it).
	if p := o.Path; p != "" {
		base = p[strings.LastIndexByte(p, '/')+1:]
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", base))
	// Checked against its digest as it goes; a mismatch cuts the download
	// short of its Content-Length, which the browser reports as failed.
	_ = c.client.GetOutput(r.Context(), o, w)
}

func (c *Console) serveDLQ(w http.ResponseWriter, r *http.Request) {
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 || limit > 1000 {
		limit = 200
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	entries, err := c.client.DLQ(ctx, limit)
	if err != nil {
		c.unavailable(w, err)
		return
	}
	type entry struct {
		Seq     uint64    `json:"seq"`
		Time    time.Time `json:"time"`
		Reason  string    `json:"reason"`
		Error   string    `json:"error"`
		Subject string    `json:"subject"`
		MsgID   string    `json:"msgId,omitempty"`
		Payload string    `json:"payload"`
	}
	out := make([]entry, len(entries))
	for i, e := range entries {
		out[i] = entry{e.Seq, e.Time, string(e.Reason), e.Error, e.Subject, e.MsgID, string(e.Payload)}
	}
	writeJSON(w, http.StatusOK, out)
}

// dlqSeq reads the {seq} of a dead letter's path.
func dlqSeq(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a dead letter's sequence", r.PathValue("seq")))
		return 0, false
	}
	return seq, true
}

// serveDLQRetry submits the job of a dead letter again (client.RetryDLQ,
// as baton dlq retry: its own run id, and its refusals) and answers with
// the job's runId.
func (c *Console) serveDLQRetry(w http.ResponseWriter, r *http.Request) {
	seq, ok := dlqSeq(w, r)
	if !ok {
		return
	}
	job, err := c.client.RetryDLQ(r.Context(), seq, "")
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "runId": job.RunID})
	case errors.Is(err, client.ErrNoEntry):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, client.ErrDuplicate):
		writeError(w, http.StatusConflict, fmt.Errorf("dead letter %d was submitted again already, within the jobs stream's duplicates window: %w", seq, err))
	case errors.Is(err, client.ErrNotRetriable), errors.Is(err, protocol.ErrBadRunID):
		writeError(w, http.StatusConflict, err)
	default:
		c.unavailable(w, err)
	}
}

// serveDLQDelete removes a dead letter (client.DeleteDLQ). It needs the
// console's NATS user to administer the DLQ stream; the refusal's
// sentence says so.
func (c *Console) serveDLQDelete(w http.ResponseWriter, r *http.Request) {
	seq, ok := dlqSeq(w, r)
	if !ok {
		return
	}
	switch err := c.client.DeleteDLQ(r.Context(), seq); {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"seq": seq})
	case errors.Is(err, client.ErrNoEntry):
		writeError(w, http.StatusNotFound, err)
	default:
		c.unavailable(w, err)
	}
}
