package stage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/mcp"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

const brokerNonce = "0123456789abcdef0123456789abcdef"

// brokerJournal collects the lines a broker records.
type brokerJournal struct {
	mu    sync.Mutex
	lines []journal.ToolRecord
}

func (j *brokerJournal) record(line []byte) error {
	r, ok := journal.ParseToolRecord(bytes.TrimSuffix(line, []byte("\n")), brokerNonce)
	if !ok {
		panic("not a tool record: " + string(line))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, r)
	return nil
}

func (j *brokerJournal) records() []journal.ToolRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]journal.ToolRecord(nil), j.lines...)
}

func newTestBroker(t *testing.T, mutate func(*runspec.Tools)) (*toolBroker, *brokerJournal) {
	spec := runspec.Tools{Names: []string{"deploy"}, MaxCalls: 3, MaxBytes: 100, Timeout: 5 * time.Second}
	if mutate != nil {
		mutate(&spec)
	}
	j := &brokerJournal{}
	return newToolBroker(spec, brokerNonce, j.record), j
}

// agentAsk sends one request as `baton mcp` does and returns the answer.
func agentAsk(t *testing.T, b *toolBroker, req string) mcp.SocketAnswer {
	t.Helper()
	a, c := net.Pipe()
	defer a.Close()
	go func() {
		defer c.Close()
		_ = b.serveAgent(c)
	}()
	go func() { _, _ = a.Write([]byte(req + "\n")) }()
	_ = a.SetDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(a).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer to %s (waited 20s): %v", req, err)
	}
	var ans mcp.SocketAnswer
	if err := json.Unmarshal(line, &ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

// fakeWorker connects to b and answers each call with answer(req).
type fakeWorker struct {
	conn net.Conn
	reqs chan chain.ToolRequest
}

func connectWorker(t *testing.T, b *toolBroker) *fakeWorker {
	w, c := net.Pipe()
	go func() { _ = b.serveWorker(c) }()
	fw := &fakeWorker{conn: w, reqs: make(chan chain.ToolRequest, 16)}
	go func() {
		r := bufio.NewReader(w)
		for {
			var req chain.ToolRequest
			if chain.ReadFrame(r, &req) != nil {
				close(fw.reqs)
				return
			}
			fw.reqs <- req
		}
	}()
	t.Cleanup(func() { w.Close() })
	return fw
}

func (fw *fakeWorker) next(t *testing.T) chain.ToolRequest {
	t.Helper()
	select {
	case req, ok := <-fw.reqs:
		if !ok {
			t.Fatal("the broker closed the worker's connection")
		}
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("no request for the worker within 10s")
	}
	return chain.ToolRequest{}
}

func (fw *fakeWorker) reply(t *testing.T, r chain.ToolReply) {
	t.Helper()
	if err := chain.WriteFrame(fw.conn, r); err != nil {
		t.Fatal(err)
	}
}

func TestToolBrokerRefusesInside(t *testing.T) {
	b, j := newTestBroker(t, nil)
	for _, tc := range []struct {
		req, want string
		unknown   bool
	}{
		{`{"op":"call","name":"rm_rf","args":{}}`, `"rm_rf" is not one of this run's tools (deploy)`, true},
		{`{"op":"call","name":"deploy","args":{"x":"` + strings.Repeat("y", 100) + `"}}`, "arguments of 108 bytes are over this run's limit of 100 bytes (toolLimits.bytes)", false},
		{`{"op":"call","name":"deploy","args":"` + strings.Repeat("y", 5000) + `"}`, "the call is over this run's limit of 100 bytes of arguments (toolLimits.bytes)", false},
		{`{"op":"call","name":"deploy","args":[1]}`, "a tool's arguments are a JSON object", false},
		{`{"op":"delete"}`, `unknown op "delete" on baton's tools socket`, false},
		{`not json`, "the request on baton's tools socket is not JSON", false},
	} {
		ans := agentAsk(t, b, tc.req)
		if ans.Error != tc.want || ans.Unknown != tc.unknown || ans.Result != nil {
			t.Errorf("%.60s: answer %+v, want %q (unknown %v)", tc.req, ans, tc.want, tc.unknown)
		}
	}
	if r := j.records(); len(r) != 0 {
		t.Errorf("refused calls were journaled: %+v", r)
	}
}

// A worker that connects gets the calls made before; a second answer to
// a call is dropped; the journal holds each call and its first answer.
func TestToolBrokerAnswersOnce(t *testing.T) {
	b, j := newTestBroker(t, nil)
	got := make(chan mcp.SocketAnswer)
	go func() { got <- agentAsk(t, b, `{"op":"call","name":"deploy","args":{"env":"prod"}}`) }()
	testWait(t, "the call's record", func() bool { return len(j.records()) == 1 })
	w1 := connectWorker(t, b)
	req := w1.next(t)
	if req.Call != 1 || req.Name != "deploy" || string(req.Args) != `{"env":"prod"}` || time.Until(req.Deadline) <= 0 {
		t.Fatalf("request %+v", req)
	}
	w1.conn.Close() // handed off before it answered
	w2 := connectWorker(t, b)
	if again := w2.next(t); again.Call != 1 {
		t.Fatalf("the successor got %+v, want call 1 again", again)
	}
	w2.reply(t, chain.ToolReply{Call: 1, Result: []byte("done")})
	if ans := <-got; ans.Result == nil || *ans.Result != "done" {
		t.Fatalf("agent got %+v", ans)
	}
	w2.reply(t, chain.ToolReply{Call: 1, Result: []byte("again")})
	// Another call's round trip orders the check after the dropped answer.
	go func() { got <- agentAsk(t, b, `{"op":"call","name":"deploy","args":{}}`) }()
	w2.reply(t, chain.ToolReply{Call: w2.next(t).Call, Error: "down"})
	if ans := <-got; ans.Error != "down" {
		t.Fatalf("agent got %+v", ans)
	}
	var phases []string
	for _, r := range j.records() {
		phases = append(phases, r.Phase+":"+string(r.Result)+r.Error)
	}
	if strings.Join(phases, " ") != "call: result:done call: result:down" {
		t.Errorf("journal %v", phases)
	}
}

func TestToolBrokerBounds(t *testing.T) {
	b, j := newTestBroker(t, func(s *runspec.Tools) { s.MaxCalls, s.Timeout = 2, 100*time.Millisecond })
	w := connectWorker(t, b)
	go func() {
		for req := range w.reqs {
			if req.Call == 1 {
				w.reply(t, chain.ToolReply{Call: 1, Result: bytes.Repeat([]byte("z"), 101)})
			} // call 2 is never answered
		}
	}()
	for _, want := range []string{
		"the tool's answer of 101 bytes is over this run's limit of 100 bytes (toolLimits.bytes)",
		"no answer within 100ms (toolLimits.timeout)",
		"this run has made its 2 tool calls (toolLimits.calls): no more are taken",
	} {
		if ans := agentAsk(t, b, `{"op":"call","name":"deploy","args":{}}`); ans.Error != want {
			t.Errorf("answer %+v, want %q", ans, want)
		}
	}
	if r := j.records(); len(r) != 4 || r[1].Error == "" || r[3].Error == "" {
		t.Errorf("journal %+v, want two calls and two error results", r)
	}
}

func TestToolBrokerList(t *testing.T) {
	b, _ := newTestBroker(t, func(s *runspec.Tools) { s.Names = []string{"deploy", "create_pr"} })
	w := connectWorker(t, b)
	go func() {
		req := w.next(t)
		w.reply(t, chain.ToolReply{List: req.List, Tools: []mcp.Tool{
			{Name: "deploy", Description: "Deploy", InputSchema: json.RawMessage(`{"type":"object","required":["env"]}`)},
			{Name: "other", Description: "not the run's"},
		}})
	}()
	want := `[{"name":"deploy","description":"Deploy","inputSchema":{"type":"object","required":["env"]}},` +
		`{"name":"create_pr","description":"(no service of this tool answered; calls may fail)","inputSchema":{"type":"object"}}]`
	// The second list, within listFresh, is answered without the workers
	// (the fake worker answers one list only).
	for range 2 {
		got, _ := json.Marshal(agentAsk(t, b, `{"op":"list"}`).Tools)
		if string(got) != want {
			t.Errorf("tools %s\nwant %s", got, want)
		}
	}
}

func testWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
