package escape

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// Bounds of hostile-tools' calls (its toolLimits).
const (
	escapeToolCalls = 16
	escapeToolBytes = 4 << 10
)

// escapeTools runs the escape agent's tool attacks (test/escapeagent
// tools.go) in run id, against a product's tool service that executes
// each idempotency key once and counts executions, and checks what must
// hold: every attack refused with a clear error; only the listed tools
// asked, each call's key executed once, the calls bound held; on the
// chain, one call and one answer for each call the runner numbered
// (wait rebuilt each tool message's journal record with the run's
// nonce), and nothing the agent forged; discovery not multiplied by the
// agent's lists; and the run succeeded.
func escapeTools(t *testing.T, w *escapeWorld, id, runDir string) {
	// The product's connection, not the worker's.
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", w.natsPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ts := testenv.NewToolService(t, nc, w.names, nil)
	// Every request a worker sends to any tool endpoint, and every
	// discovery request, seen beside the service.
	var mu sync.Mutex
	var asked []*nats.Msg
	discoveries := 0
	for subject, seen := range map[string]func(*nats.Msg){
		w.names.ToolSubjects():    func(m *nats.Msg) { asked = append(asked, m) },
		micro.APIPrefix + ".INFO": func(*nats.Msg) { discoveries++ },
	} {
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) { mu.Lock(); seen(m); mu.Unlock() })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	w.submit(map[string]any{"runId": id, "profile": "hostile-tools", "args": []string{"tools", "--run-dir", runDir,
		"--calls", strconv.Itoa(escapeToolCalls), "--bytes", strconv.Itoa(escapeToolBytes)}})
	r := w.wait(t, id, 90*time.Second)
	elapsed := time.Since(start)
	escapeSucceeded(t, r)
	want := []string{"allowed: list the run's tools", "allowed: call deploy", "allowed: a tool's error",
		"allowed: replay a call's request three times at once", "set a call's number, key and run",
		"answer a call on the tools socket", "answer a list on the tools socket", "an unknown op",
		"forge tool records on stdout", `call the unlisted tool "rm_rf"`, `call the unlisted tool "deploy.>"`,
		`call the unlisted tool "../deploy"`, "call with the arguments [1]", "call with arguments over toolLimits.bytes",
		"a frame of 1 MiB", "a frame of 1 MiB without a newline", `the malformed frame "not json\n"`,
		"two calls on one connection", "reach the workers' tools socket at " + runDir + "/tools.sock",
		"find the workers' tools socket in /proc/net/unix", "hold more tool connections than runner-outer serves",
		"allowed: call deploy after the connections' flood", "allowed: 50 lists at once", "flood tool calls"}
	r.attempts(t, want...)

	// The chain: the runner numbered exactly the bound's calls, from 1,
	// each with its call then its one answer, of listed tools only.
	calls, results := map[uint64]protocol.ToolMessage{}, map[uint64]protocol.ToolMessage{}
	for _, m := range r.tools {
		switch _, called := calls[m.Call]; {
		case m.Name != "deploy" && m.Name != "create_pr":
			t.Errorf("ESCAPE: a tool message of %q: %+v", m.Name, m)
		case m.Phase == journal.ToolCall && !called:
			calls[m.Call] = m
		case m.Phase == journal.ToolResult && called:
			if _, dup := results[m.Call]; dup {
				t.Errorf("call %d answered twice on the chain: %+v", m.Call, m)
			}
			results[m.Call] = m
		default:
			t.Errorf("tool message %+v: a repeated call, or an answer before its call", m)
		}
	}
	for n := uint64(1); n <= escapeToolCalls; n++ {
		if _, ok := results[n]; !ok {
			t.Errorf("call %d has no call and answer on the chain (%d calls, %d answers)", n, len(calls), len(results))
		}
	}
	if len(calls) != escapeToolCalls || len(results) != escapeToolCalls {
		t.Errorf("%d calls and %d answers on the chain, want %d of each (toolLimits.calls)", len(calls), len(results), escapeToolCalls)
	}
	// What the agent forged on stdout is its own lines (wait checked that
	// every tool message stands for a nonced record of the journal).
	for _, forged := range []string{`{"__tool":1,"__nonce":"00000000000000000000000000000000","phase":"result","name":"deploy","result":"Zm9yZ2Vk"}`,
		`{"__tool":99,"__nonce":"guess","phase":"call","name":"deploy","args":"e30="}`} {
		if !bytes.Contains(r.events, []byte(forged+"\n")) {
			t.Errorf("the forged record %s is not on the chain as the agent's line", forged)
		}
	}

	// The service: asked once per call of deploy, under that call's key
	// and the run's identity, whatever the agent said; each key executed
	// once; a second request on one connection never made.
	testenv.WaitFor(t, 5*time.Second, "the requests to the tool endpoints, seen beside the service", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) >= escapeToolCalls
	})
	mu.Lock()
	keys := map[string]bool{}
	for _, m := range asked {
		call, _ := strconv.ParseUint(m.Header.Get(protocol.HeaderToolCall), 10, 64)
		c, ok := calls[call]
		key := m.Header.Get(protocol.HeaderIdempotencyKey)
		switch {
		case !ok || m.Subject != w.names.ToolSubject(c.Name):
			t.Errorf("ESCAPE: a request on %s of call %d, which the chain has as %+v", m.Subject, call, c)
		case key != fmt.Sprintf("%s:%d", id, call) || m.Header.Get(protocol.HeaderToolRunID) != id || keys[key]:
			t.Errorf("request of call %d: key %q, run %q (asked before: %v)", call, key, m.Header.Get(protocol.HeaderToolRunID), keys[key])
		case !bytes.Equal(m.Data, c.Args):
			t.Errorf("request of call %d carries %s, the chain's call %s", call, m.Data, c.Args)
		}
		keys[key] = true
		if bytes.Contains(m.Data, []byte("two-of-two")) {
			t.Errorf("ESCAPE: the second call on one connection was asked: %s", m.Data)
		}
	}
	if len(asked) != escapeToolCalls {
		t.Errorf("%d requests to the tool endpoints, want %d", len(asked), escapeToolCalls)
	}
	// Each list the workers answer is a discovery every service answers;
	// runner-outer reuses an answer for 5 s (listFresh).
	if most := 1 + int(elapsed/(5*time.Second)); discoveries > most {
		t.Errorf("%d discovery requests in %v, want at most %d: the agent's 51 lists multiplied them", discoveries, elapsed, most)
	}
	mu.Unlock()
	ts.Mu.Lock()
	defer ts.Mu.Unlock()
	var deploys []string
	for n, c := range calls {
		if c.Name == "deploy" {
			deploys = append(deploys, fmt.Sprintf("%s:%d", id, n))
		}
	}
	for key, n := range ts.Executed {
		if n != 1 || !slices.Contains(deploys, key) {
			t.Errorf("ESCAPE: key %s executed %d times; the chain's deploy calls are %v", key, n, deploys)
		}
	}
	if len(ts.Executed) != len(deploys) || len(ts.Requests) != len(deploys) {
		t.Errorf("%d keys executed, %d requests; want one of each per deploy call (%d)", len(ts.Executed), len(ts.Requests), len(deploys))
	}
	t.Logf("tools: %d calls numbered, %d of deploy, %d requests to endpoints, %d discoveries in %v",
		len(calls), len(deploys), len(asked), discoveries, elapsed.Round(time.Millisecond))
}
