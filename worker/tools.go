package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/mcp"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// Bounds of the worker's side of host tools.
const (
	// toolsRedial is the pause before connecting to a runner's tools
	// socket again.
	toolsRedial = 500 * time.Millisecond
	// discoverFirst bounds the wait for the first service's $SRV.INFO
	// answer, discoverQuiet the wait for each further one.
	discoverFirst = time.Second
	discoverQuiet = 100 * time.Millisecond
)

// isTool reports whether l is the runner's record of a host tool call or
// of its answer.
func (r *run) isTool(l follow.Line) bool {
	_, ok := journal.ParseToolRecord(l.Data, r.nonce)
	return ok
}

// publishTool puts the tool record l on the chain as a tool message.
func (r *run) publishTool(ctx context.Context, l follow.Line) error {
	rec, _ := journal.ParseToolRecord(l.Data, r.nonce)
	return r.chain.PublishTool(ctx, rec, l.End)
}

// startTools serves r's host tool calls while the run is held here, if
// its runner serves tools; stop ends it and waits for it.
func (w *Worker) startTools(ctx context.Context, r *run) (stop func()) {
	if !exists(filepath.Join(string(r.dir), journal.ToolsSocketName)) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.serveTools(ctx, r)
	}()
	return func() {
		cancel()
		<-done
	}
}

// serveTools takes the runner's requests, reconnecting until ctx ends or
// the runner is gone: on each connection the runner hands over every call
// still unanswered, which this worker asks again under the call's
// idempotency key.
func (w *Worker) serveTools(ctx context.Context, r *run) {
	for ctx.Err() == nil {
		conn, err := sandbox.DialTools(ctx, r.dir)
		if errors.Is(err, sandbox.ErrNoTools) {
			if alive, aerr := sandbox.Alive(r.dir); aerr == nil && !alive {
				return
			}
		}
		if err == nil {
			w.toolsConn(ctx, r, conn)
		} else {
			r.log.Debug().Err(err).Msg("connect to the runner's tools socket")
		}
		select {
		case <-ctx.Done():
		case <-time.After(toolsRedial):
		}
	}
}

// toolsConn serves one connection until it ends or ctx does; it waits for
// the requests it started.
func (w *Worker) toolsConn(ctx context.Context, r *run, conn *sandbox.ToolsConn) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asked := map[uint64]bool{} // calls asked on this connection
	for {
		req, err := conn.Next()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Debug().Err(err).Msg("the runner's tools socket")
			}
			return
		}
		if req.Call > 0 {
			if asked[req.Call] {
				continue
			}
			asked[req.Call] = true
		}
		wg.Go(func() {
			rctx, cancel := context.WithDeadline(ctx, req.Deadline)
			defer cancel()
			var rep sandbox.ToolReply
			if req.Call > 0 {
				rep = w.callTool(rctx, r, req)
			} else {
				rep = sandbox.ToolReply{List: req.List, Tools: w.discoverTools(rctx)}
			}
			if ctx.Err() != nil {
				return // handed off: the runner hands it to the successor
			}
			if err := conn.Reply(rep); err != nil {
				r.log.Warn().Err(err).Msg("answer the runner's tool request")
			}
		})
	}
}

// callTool asks the tool's service, with the run's identity and the
// call's idempotency key in headers the agent cannot set.
func (w *Worker) callTool(ctx context.Context, r *run, req sandbox.ToolRequest) sandbox.ToolReply {
	subject := w.names.ToolSubject(req.Name)
	m := nats.NewMsg(subject)
	m.Data = req.Args
	m.Header.Set(protocol.HeaderToolRunID, r.id)
	m.Header.Set(protocol.HeaderToolProfile, r.rec.Profile)
	if r.rec.Session != "" {
		m.Header.Set(protocol.HeaderToolSession, r.rec.Session)
	}
	labels := []byte("{}")
	if len(r.rec.Labels) > 0 {
		labels, _ = json.Marshal(r.rec.Labels)
	}
	m.Header.Set(protocol.HeaderToolLabels, string(labels))
	call := strconv.FormatUint(req.Call, 10)
	m.Header.Set(protocol.HeaderToolCall, call)
	m.Header.Set(protocol.HeaderIdempotencyKey, r.id+":"+call)
	began := time.Now()
	resp, err := w.nc.RequestMsgWithContext(ctx, m)
	log := r.log.Info().Str("tool", req.Name).Uint64("call", req.Call).Dur("took", time.Since(began))
	rep := sandbox.ToolReply{Call: req.Call}
	outcome := "error"
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		outcome = "no_service"
		rep.Error = fmt.Sprintf("tool %s: no service answers on %s", req.Name, subject)
	case errors.Is(err, context.Canceled):
		outcome = "abandoned" // this worker stops: the runner hands the call to its successor
		rep.Error = fmt.Sprintf("tool %s: %v", req.Name, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		outcome = "timeout"
		rep.Error = fmt.Sprintf("tool %s: no answer within the run's toolLimits.timeout", req.Name)
	case err != nil:
		rep.Error = fmt.Sprintf("tool %s: %v", req.Name, err)
	case resp.Header.Get(micro.ErrorCodeHeader) != "":
		rep.Error = fmt.Sprintf("tool %s failed (%s): %s", req.Name, resp.Header.Get(micro.ErrorCodeHeader), resp.Header.Get(micro.ErrorHeader))
	default:
		outcome = "ok"
		rep.Result = resp.Data
		if rep.Result == nil {
			rep.Result = []byte{}
		}
	}
	w.metrics.toolCalls.WithLabelValues(outcome).Inc()
	if err == nil {
		w.metrics.toolDuration.Observe(time.Since(began).Seconds())
	}
	log.Str("outcome", outcome).Str("error", rep.Error).Msg("host tool call")
	return rep
}

// discoverTools reads the tool endpoints' descriptions from the services'
// $SRV.INFO answers (NATS micro discovery): every service answers; the
// wait ends a moment after the last answer.
func (w *Worker) discoverTools(ctx context.Context) []mcp.Tool {
	inbox := protocol.ToolsDiscoveryInbox + "." + strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix)
	sub, err := w.nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := w.nc.PublishRequest(micro.APIPrefix+".INFO", inbox, nil); err != nil {
		return nil
	}
	prefix := w.names.ToolSubject("")
	var tools []mcp.Tool
	wait := discoverFirst
	for {
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			return tools
		}
		wait = discoverQuiet
		var info micro.Info
		if json.Unmarshal(m.Data, &info) != nil {
			continue
		}
		for _, e := range info.Endpoints {
			name, ok := strings.CutPrefix(e.Subject, prefix)
			if !ok || !journal.ValidToolName(name) {
				continue
			}
			t := mcp.Tool{Name: name, Description: e.Metadata[protocol.ToolMetaDescription]}
			if schema := e.Metadata[protocol.ToolMetaSchema]; json.Valid([]byte(schema)) {
				t.InputSchema = json.RawMessage(schema)
			}
			tools = append(tools, t)
		}
	}
}
