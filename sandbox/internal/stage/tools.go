package stage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/mcp"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Bounds of the tools broker.
const (
	// toolGrace is how long past a call's deadline runner-outer waits for
	// the worker's answer (which may be the service's own timeout error)
	// before it answers the agent with a timeout itself.
	toolGrace = 2 * time.Second
	// workerQueue bounds the requests queued for one worker connection;
	// a worker that falls that far behind is dropped (it reconnects, and
	// is handed every request still unanswered).
	workerQueue = 256
	// agentRequestSlack is what an agent's request may hold beyond the
	// arguments: the op, the name, JSON.
	agentRequestSlack = 4 << 10
	// listFresh is how long the workers' tool list answers the agent's
	// lists: each list the workers answer is a discovery request every
	// service answers, which an agent must not be able to multiply.
	listFresh = 5 * time.Second
	// maxToolError bounds an answer's error text, as journaled and told
	// the agent (a service's error is its to word, not to size).
	maxToolError = 4 << 10
)

// toolBroker is runner-outer's side of the run's host tools: it takes the
// agent's calls on the sandbox's tools socket, journals each (a nonced
// call record) before any worker sees it, hands it to the workers on the
// run directory's tools socket, and journals the first answer (a nonced
// result record) before the agent gets it. A call is answered once: a
// later answer to it, a successor worker's included, is dropped.
type toolBroker struct {
	spec   runspec.Tools
	nonce  string
	record func(line []byte) error // journal.Writer.Insert

	mu       sync.Mutex
	calls    uint64 // calls made, the last call's number
	pending  map[uint64]*toolWait
	lists    map[uint64]chan []mcp.Tool
	nextList uint64
	workers  map[chan chain.ToolRequest]struct{}

	// listMu: one list asked of the workers at a time; found is their
	// last answer, at foundAt.
	listMu  sync.Mutex
	found   []mcp.Tool
	foundAt time.Time
}

// toolWait is a call waiting for its answer.
type toolWait struct {
	req  chain.ToolRequest
	done chan struct{}
	ans  mcp.SocketAnswer
}

func newToolBroker(spec runspec.Tools, nonce string, record func([]byte) error) *toolBroker {
	return &toolBroker{spec: spec, nonce: nonce, record: record, pending: map[uint64]*toolWait{},
		lists: map[uint64]chan []mcp.Tool{}, workers: map[chan chain.ToolRequest]struct{}{}}
}

// serveAgent answers one connection of the agent's: one request, one
// answer.
func (b *toolBroker) serveAgent(c io.ReadWriter) error {
	limit := b.spec.MaxBytes + agentRequestSlack
	line, err := bufio.NewReaderSize(io.LimitReader(c, int64(limit)+1), 64<<10).ReadBytes('\n')
	var ans mcp.SocketAnswer
	var req mcp.SocketRequest
	switch {
	case len(line) > limit:
		ans.Error = fmt.Sprintf("the call is over this run's limit of %d bytes of arguments (toolLimits.bytes)", b.spec.MaxBytes)
	case err != nil && !errors.Is(err, io.EOF):
		return err
	case json.Unmarshal(line, &req) != nil:
		ans.Error = "the request on baton's tools socket is not JSON"
	case req.Op == mcp.OpList:
		ans = b.list()
	case req.Op == mcp.OpCall:
		ans = b.call(req.Name, req.Args)
	default:
		ans.Error = fmt.Sprintf("unknown op %q on baton's tools socket", req.Op)
	}
	return chain.WriteFrame(c, ans)
}

// call makes one call and waits for its answer.
func (b *toolBroker) call(name string, args json.RawMessage) mcp.SocketAnswer {
	if !b.spec.Has(name) {
		return mcp.SocketAnswer{Unknown: true, Error: fmt.Sprintf("%q is not one of this run's tools (%s)", name, strings.Join(b.spec.Names, ", "))}
	}
	if len(args) > b.spec.MaxBytes {
		return mcp.SocketAnswer{Error: fmt.Sprintf("arguments of %d bytes are over this run's limit of %d bytes (toolLimits.bytes)", len(args), b.spec.MaxBytes)}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return mcp.SocketAnswer{Error: "a tool's arguments are a JSON object"}
	}
	b.mu.Lock()
	if b.calls >= uint64(b.spec.MaxCalls) {
		b.mu.Unlock()
		return mcp.SocketAnswer{Error: fmt.Sprintf("this run has made its %d tool calls (toolLimits.calls): no more are taken", b.spec.MaxCalls)}
	}
	// Numbered and journaled under the lock: call numbers follow the
	// journal's order.
	n := b.calls + 1
	w := &toolWait{req: chain.ToolRequest{Call: n, Name: name, Args: args, Deadline: time.Now().Add(b.spec.Timeout)}, done: make(chan struct{})}
	if err := b.record(journal.ToolRecord{Call: n, Nonce: b.nonce, Phase: journal.ToolCall, Name: name, Args: args}.Line()); err != nil {
		b.mu.Unlock()
		return mcp.SocketAnswer{Error: "the call could not be journaled: " + err.Error()}
	}
	b.calls = n
	b.pending[n] = w
	b.handOut(w.req)
	b.mu.Unlock()
	t := time.NewTimer(b.spec.Timeout + toolGrace)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		b.answer(chain.ToolReply{Call: n, Error: fmt.Sprintf("no answer within %v (toolLimits.timeout)", b.spec.Timeout)})
		<-w.done
	}
	return w.ans
}

// answer journals the first answer to a call, and hands it to the call's
// waiter; it drops any other.
func (b *toolBroker) answer(r chain.ToolReply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.pending[r.Call]
	if w == nil {
		return
	}
	if len(r.Error) > maxToolError {
		r.Error = strings.ToValidUTF8(r.Error[:maxToolError], "") + "…"
	}
	if len(r.Result) > b.spec.MaxBytes {
		r = chain.ToolReply{Call: r.Call, Error: fmt.Sprintf("the tool's answer of %d bytes is over this run's limit of %d bytes (toolLimits.bytes)", len(r.Result), b.spec.MaxBytes)}
	}
	rec := journal.ToolRecord{Call: r.Call, Nonce: b.nonce, Phase: journal.ToolResult, Name: w.req.Name, Result: r.Result, Error: r.Error}
	if r.Error == "" && r.Result == nil {
		rec.Result = []byte{} // an empty answer is an answer
	}
	if err := b.record(rec.Line()); err != nil {
		w.ans = mcp.SocketAnswer{Error: "the answer could not be journaled: " + err.Error()}
	} else if r.Error != "" {
		w.ans = mcp.SocketAnswer{Error: r.Error}
	} else {
		s := string(r.Result)
		w.ans = mcp.SocketAnswer{Result: &s}
	}
	delete(b.pending, r.Call)
	close(w.done)
}

// list asks the workers for the tools' descriptions, at most once in
// listFresh; with no answer in time it lists the names alone.
func (b *toolBroker) list() mcp.SocketAnswer {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	if !b.foundAt.IsZero() && time.Since(b.foundAt) < listFresh {
		return mcp.SocketAnswer{Tools: b.listed(b.found)}
	}
	b.mu.Lock()
	b.nextList++
	n := b.nextList
	ch := make(chan []mcp.Tool, 1)
	b.lists[n] = ch
	b.handOut(chain.ToolRequest{List: n, Deadline: time.Now().Add(b.spec.Timeout)})
	b.mu.Unlock()
	t := time.NewTimer(b.spec.Timeout + toolGrace)
	defer t.Stop()
	var tools []mcp.Tool
	select {
	case tools = <-ch:
		b.found, b.foundAt = tools, time.Now()
	case <-t.C:
		b.mu.Lock()
		delete(b.lists, n)
		b.mu.Unlock()
	}
	return mcp.SocketAnswer{Tools: b.listed(tools)}
}

// listed is the run's tools, in the profile's order, described as found
// (a tool no service describes has an open schema).
func (b *toolBroker) listed(found []mcp.Tool) []mcp.Tool {
	out := make([]mcp.Tool, 0, len(b.spec.Names))
	for _, name := range b.spec.Names {
		t := mcp.Tool{Name: name, Description: "(no service of this tool answered; calls may fail)", InputSchema: json.RawMessage(`{"type":"object"}`)}
		for _, f := range found {
			if f.Name == name {
				t.Description = f.Description
				// MCP wants an object schema; anything else is left open.
				if bytes.HasPrefix(f.InputSchema, []byte("{")) && json.Valid(f.InputSchema) {
					t.InputSchema = f.InputSchema
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// handOut queues req for every connected worker; b.mu is held.
func (b *toolBroker) handOut(req chain.ToolRequest) {
	for q := range b.workers {
		select {
		case q <- req:
		default:
			// Fallen behind: dropped, it reconnects for the whole set.
			delete(b.workers, q)
			close(q)
		}
	}
}

// serveWorker serves one worker's connection: every request unanswered
// first, then each new one, while it sends answers.
func (b *toolBroker) serveWorker(c io.ReadWriteCloser) error {
	b.mu.Lock()
	q := make(chan chain.ToolRequest, len(b.pending)+len(b.lists)+workerQueue)
	for _, n := range slices.Sorted(maps.Keys(b.pending)) {
		q <- b.pending[n].req
	}
	for n := range b.lists {
		q <- chain.ToolRequest{List: n, Deadline: time.Now().Add(b.spec.Timeout)}
	}
	b.workers[q] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if _, ok := b.workers[q]; ok {
			delete(b.workers, q)
			close(q)
		}
		b.mu.Unlock()
	}()
	go func() {
		for req := range q {
			if chain.WriteFrame(c, req) != nil {
				c.Close() // the read below ends
				return
			}
		}
		c.Close() // dropped: the worker sees the end and reconnects
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		var rep chain.ToolReply
		if err := chain.ReadFrame(r, &rep); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch {
		case rep.Call > 0:
			b.answer(rep)
		case rep.List > 0:
			b.mu.Lock()
			if ch, ok := b.lists[rep.List]; ok {
				delete(b.lists, rep.List)
				ch <- rep.Tools
			}
			b.mu.Unlock()
		}
	}
}

// mcpSocketNote says what the tools socket serves, for state.ndjson.
func mcpSocketNote(names []string) string {
	return mcp.SocketAddr + " in the sandbox: " + strings.Join(names, ", ")
}
