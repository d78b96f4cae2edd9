package agui_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
)

// msgs builds a chain: each item is "<kind> <data>", optionally followed
// by " | Header=value" pairs; sequences count from 1.
func msgs(items ...string) []agui.Message {
	var out []agui.Message
	for i, it := range items {
		body, hdrs, _ := strings.Cut(it, " | ")
		kind, data, _ := strings.Cut(body, " ")
		m := agui.Message{Kind: protocol.RunKind(kind), Seq: uint64(i + 1), Data: []byte(data), Header: map[string][]string{}}
		for _, h := range strings.Split(hdrs, " | ") {
			if k, v, ok := strings.Cut(h, "="); ok {
				m.Header[k] = []string{v}
			}
		}
		out = append(out, m)
	}
	return out
}

func status(s string, extra ...string) string {
	return `status {"status":"` + s + `","runId":"r"` + strings.Join(extra, "") + `}`
}

// summary is an event in a word or three: its type and what tells it
// apart.
func summary(e agui.Event) string {
	s := string(e.Type)
	switch e.Type {
	case agui.Custom:
		s += " " + e.Name
	case agui.Raw:
		s += " " + e.Source
	case agui.RunFinished:
		s += " " + string(e.Outcome.Type)
	case agui.RunError:
		s += " " + e.Code + ": " + e.Message
	case agui.TextMessageStart:
		s += " " + e.Role
	case agui.TextMessageContent, agui.ToolCallArgs, agui.ReasoningMessageContent:
		s += " " + e.Delta
	case agui.ToolCallStart:
		s += " " + e.ToolCallName
	case agui.ToolCallResult:
		s += " " + *e.Content
	}
	return s
}

func summaries(t *testing.T, evs []agui.Projected) []string {
	t.Helper()
	if err := checkStream(evs, false); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, summary(e.Event))
	}
	return out
}

func TestStatuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain []string
		want  []string
	}{
		{"succeeded", []string{status("started"), status("succeeded")},
			[]string{"RUN_STARTED", "RUN_FINISHED success"}},
		{"failed with a reason", []string{status("started"), status("failed", `,"reason":"agent exited with code 2"`)},
			[]string{"RUN_STARTED", "RUN_ERROR failed: agent exited with code 2"}},
		{"failed without one", []string{status("started"), status("failed")},
			[]string{"RUN_STARTED", "RUN_ERROR failed: run failed"}},
		{"timeout", []string{status("started"), status("timeout", `,"reason":"idle"`)},
			[]string{"RUN_STARTED", "RUN_ERROR timeout: idle"}},
		{"lost", []string{status("started"), status("lost", `,"retriedAs":"r-a2"`)},
			[]string{"RUN_STARTED", "RUN_ERROR lost: run lost"}},
		{"cancelled", []string{status("started"), status("cancelled")},
			[]string{"RUN_STARTED", "RUN_FINISHED cancelled"}},
		{"paused after waiting", []string{status("started"), status("waiting"), status("paused")},
			[]string{"RUN_STARTED", "CUSTOM baton.waiting", "RUN_FINISHED success", "RUN_STARTED", "RUN_FINISHED success"}},
		{"a hand-off", []string{status("started"), status("handoff"), status("attached"), status("succeeded")},
			[]string{"RUN_STARTED", "CUSTOM baton.handoff", "CUSTOM baton.attached", "RUN_FINISHED success"}},
		{"a hand-off while waiting", []string{status("started"), status("waiting"), status("handoff"), status("attached"), status("waiting")},
			[]string{"RUN_STARTED", "CUSTOM baton.waiting", "RUN_FINISHED success",
				"RUN_STARTED", "CUSTOM baton.handoff", "CUSTOM baton.attached", "CUSTOM baton.waiting", "RUN_FINISHED success"}},
		{"a second started, an unknown status", []string{status("started"), status("started"), status("frozen")},
			[]string{"RUN_STARTED", "CUSTOM baton.started", "CUSTOM baton.frozen"}},
		{"a status that is none", []string{status("started"), `status {"status":3}`, `status not json`},
			[]string{"RUN_STARTED", "RAW baton", "CUSTOM baton.raw"}},
		{"host tool calls", []string{status("started"), `tool {"call":1,"phase":"call","name":"deploy","args":{}}`,
			`tool {"call":1,"phase":"result","name":"deploy","result":"ok"}`, `tool not json`, status("succeeded")},
			[]string{"RUN_STARTED", "CUSTOM baton.tool", "CUSTOM baton.tool", "CUSTOM baton.raw", "RUN_FINISHED success"}},
		{"a chain whose start aged out", []string{`raw banner`, status("succeeded")},
			[]string{"RUN_STARTED", "CUSTOM baton.raw", "RUN_FINISHED success"}},
		{"egress", []string{status("started"), `egress {"host":"api.example.com","port":443,"method":"CONNECT","allowed":true}`,
			`egress {"host":"x"`, `egress [1]`, status("succeeded")},
			[]string{"RUN_STARTED", "CUSTOM baton.egress", "CUSTOM baton.error", "CUSTOM baton.error", "RUN_FINISHED success"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summaries(t, project(agui.New("r"), msgs(tc.chain...)))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestTurnOutcome: the agent's account of a turn decides how the turn
// ends, unless baton's status says worse.
func TestTurnOutcome(t *testing.T) {
	const (
		ok       = `events {"type":"result","subtype":"success","is_error":false,"result":"done"}`
		failed   = `events {"type":"result","subtype":"error_during_execution","is_error":true,"result":"boom"}`
		maxTurns = `events {"type":"result","subtype":"error_max_turns","is_error":true}`
		aborted  = `events {"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_tools"}`
	)
	interrupt := `input {"type":"control_request","request_id":"i","request":{"subtype":"interrupt"}} | Baton-Input-Kind=interrupt`
	for _, tc := range []struct {
		name  string
		chain []string
		want  string
	}{
		{"success, waiting", []string{status("started"), ok, status("waiting")}, "RUN_FINISHED success"},
		{"an error, waiting", []string{status("started"), failed, status("waiting")}, "RUN_ERROR error_during_execution: boom"},
		{"an error after an interrupt", []string{status("started"), interrupt, failed, status("waiting")}, "RUN_FINISHED cancelled"},
		{"aborted", []string{status("started"), aborted, status("waiting")}, "RUN_FINISHED cancelled"},
		{"the turn limit", []string{status("started"), maxTurns, status("succeeded")}, "RUN_FINISHED success"},
		{"an error, then exit 0", []string{status("started"), failed, status("succeeded")}, "RUN_ERROR error_during_execution: boom"},
		{"success, then a timeout", []string{status("started"), ok, status("timeout", `,"reason":"timeout"`)}, "RUN_ERROR timeout: timeout"},
		{"codex exec failed", []string{status("started"), `events {"type":"turn.failed","error":{"message":"quota"}}`, status("failed")}, "RUN_ERROR failed: run failed"},
		{"codex exec failed, exit 0", []string{status("started"), `events {"type":"turn.failed","error":{"message":"quota"}}`, status("succeeded")}, "RUN_ERROR turn.failed: quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summaries(t, project(agui.New("r"), msgs(tc.chain...)))
			if last := got[len(got)-1]; last != tc.want {
				t.Errorf("ends %q, want %q (all: %q)", last, tc.want, got)
			}
		})
	}
}

// TestUsage: the turn's usage, in AG-UI's accounting, on the run's end.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain []string
		want  []agui.TokenUsage
	}{
		{"claude per model", []string{`events {"type":"result","subtype":"success","usage":{"input_tokens":1},"modelUsage":{"b":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":100,"cacheCreationInputTokens":20},"a":{"inputTokens":1,"outputTokens":2}}}`},
			[]agui.TokenUsage{{Provider: "anthropic", Model: "a", InputTokens: 1, OutputTokens: 2, TotalTokens: 3},
				{Provider: "anthropic", Model: "b", InputTokens: 130, OutputTokens: 5, TotalTokens: 135, CachedInputTokens: 100, CacheWriteInputTokens: 20}}},
		{"claude without models", []string{`events {"type":"result","subtype":"success","usage":{"input_tokens":3,"cache_read_input_tokens":4,"output_tokens":5}}`},
			[]agui.TokenUsage{{Provider: "anthropic", InputTokens: 7, OutputTokens: 5, TotalTokens: 12, CachedInputTokens: 4}}},
		{"codex exec", []string{`events {"type":"thread.started"}`, `events {"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":8,"output_tokens":10,"reasoning_output_tokens":4}}`},
			[]agui.TokenUsage{{Provider: "openai", InputTokens: 20, OutputTokens: 10, TotalTokens: 30, ReasoningTokens: 4, CachedInputTokens: 8}}},
		{"codex app-server, summed", []string{
			`events {"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":10,"outputTokens":5,"totalTokens":15,"cachedInputTokens":4}}}}`,
			`events {"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":10,"outputTokens":5,"totalTokens":15,"reasoningOutputTokens":2}}}}`,
			`events {"method":"turn/completed","params":{"turn":{"status":"completed"}}}`},
			[]agui.TokenUsage{{Provider: "openai", InputTokens: 20, OutputTokens: 10, TotalTokens: 30, ReasoningTokens: 2, CachedInputTokens: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := project(agui.New("r"), msgs(append(append([]string{status("started")}, tc.chain...), status("succeeded"))...))
			end := evs[len(evs)-1].Event
			if !reflect.DeepEqual(end.Usage, tc.want) {
				t.Errorf("usage %+v\nwant  %+v", end.Usage, tc.want)
			}
		})
	}
}

func TestInputs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  []string
	}{
		{"plain text", "input fix the bug\n | Baton-Input-Seq=9", []string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT fix the bug", "TEXT_MESSAGE_END"}},
		{"claude user, a string", `input {"type":"user","message":{"role":"user","content":"hi"}}`, []string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT hi", "TEXT_MESSAGE_END"}},
		{"claude user, blocks", `input {"type":"user","message":{"content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}}`,
			[]string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT a\nb", "TEXT_MESSAGE_END"}},
		{"claude user, no text", `input {"type":"user","message":{"content":[{"type":"tool_result"}]}}`, []string{"CUSTOM baton.input"}},
		{"claude approval answer", `input {"type":"control_response","response":{"subtype":"success","request_id":"R","response":{"behavior":"deny","message":"no"}}}`,
			[]string{"CUSTOM baton.approval_answer"}},
		{"codex turn", `input {"method":"turn/start","id":2,"params":{"threadId":"t","input":[{"type":"text","text":"go"},{"type":"image","url":"x"}]}}`,
			[]string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT go", "TEXT_MESSAGE_END"}},
		{"codex steer", `input {"method":"turn/steer","id":5,"params":{"input":[{"type":"text","text":"faster"}]}}`,
			[]string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT faster", "TEXT_MESSAGE_END"}},
		{"codex approval answer", `input {"id":0,"result":{"decision":"accept"}}`, []string{"CUSTOM baton.approval_answer"}},
		{"codex approval answer, an object", `input {"id":0,"result":{"decision":{"acceptWithExecpolicyAmendment":{}}}}`, []string{"CUSTOM baton.approval_answer"}},
		{"a handshake", `input {"method":"initialize","id":0}`, []string{"CUSTOM baton.input"}},
		{"an interrupt", `input {"type":"control_request"} | Baton-Input-Kind=interrupt | Baton-Input-Seq=4`, []string{"CUSTOM baton.interrupt"}},
		{"the end of input", `input  | Baton-Input-EOF=true`, []string{"CUSTOM baton.eof"}},
		{"the last input", "input bye\n | Baton-Input-EOF=true", []string{"TEXT_MESSAGE_START user", "TEXT_MESSAGE_CONTENT bye", "TEXT_MESSAGE_END", "CUSTOM baton.eof"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summaries(t, project(agui.New("r"), msgs(status("started"), tc.input)))[1:]
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestJobInput(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		want        []string
	}{
		{"a prompt of lines", "Fix it.\nThen test it.\n", []string{"TEXT_MESSAGE_CONTENT Fix it.\nThen test it."}},
		{"stream-json lines", `{"type":"user","message":{"content":"one"}}` + "\n" + `{"method":"initialized"}`, []string{"TEXT_MESSAGE_CONTENT one", "CUSTOM baton.input"}},
		{"JSON and text", "{\"a\":1}\nplease", []string{"TEXT_MESSAGE_CONTENT {\"a\":1}\nplease"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range summaries(t, project(agui.New("r", agui.WithJobInput([]byte(tc.input))), msgs(status("started")))) {
				if strings.HasPrefix(s, "TEXT_MESSAGE_CONTENT") || strings.HasPrefix(s, "CUSTOM") {
					got = append(got, s)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestChunks: pieces are joined; a sequence baton never publishes is
// reported and dropped, and the projection goes on.
func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain []string
		want  []string
	}{
		{"joined", []string{"raw ab | Baton-Chunk=1/3", "raw cd | Baton-Chunk=2/3", "raw ef | Baton-Chunk=3/3"}, []string{"CUSTOM baton.raw abcdef"}},
		{"one piece", []string{"raw ab | Baton-Chunk=1/1"}, []string{"CUSTOM baton.raw ab"}},
		{"a JSON line", []string{`events {"a" | Baton-Chunk=1/2`, `events :1} | Baton-Chunk=2/2`}, []string{"RAW agent"}},
		{"no first piece", []string{"raw cd | Baton-Chunk=2/3", "raw x"}, []string{"CUSTOM baton.error", "CUSTOM baton.raw x"}},
		{"a piece missing", []string{"raw ab | Baton-Chunk=1/3", "raw ef | Baton-Chunk=3/3", "raw x"}, []string{"CUSTOM baton.error", "CUSTOM baton.raw x"}},
		{"another line between", []string{"raw ab | Baton-Chunk=1/2", "raw x", "raw cd | Baton-Chunk=2/2"}, []string{"CUSTOM baton.error", "CUSTOM baton.raw x", "CUSTOM baton.error"}},
		{"another subject", []string{"raw ab | Baton-Chunk=1/2", "events cd | Baton-Chunk=2/2"}, []string{"CUSTOM baton.error", "CUSTOM baton.error"}},
		{"bad headers", []string{"raw a | Baton-Chunk=0/2", "raw a | Baton-Chunk=3/2", "raw a | Baton-Chunk=+1/2", "raw a | Baton-Chunk=x"}, []string{"CUSTOM baton.error", "CUSTOM baton.error", "CUSTOM baton.error", "CUSTOM baton.error"}},
		{"too long", []string{"raw abcdef | Baton-Chunk=1/2", "raw ghijkl | Baton-Chunk=2/2", "raw x"}, []string{"CUSTOM baton.error", "CUSTOM baton.raw x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			evs := project(agui.New("r", agui.WithMaxLine(8)), msgs(append([]string{status("started")}, tc.chain...)...))
			for _, e := range evs[1:] {
				s := summary(e.Event)
				if e.Event.Name == "baton.raw" {
					var v struct{ Line string }
					_ = json.Unmarshal(e.Event.Value, &v)
					s += " " + v.Line
				}
				got = append(got, s)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestSniff: without WithDialect the first line that tells fixes the
// dialect; lines before it are RAW.
func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string // the summary of the last line's first event
	}{
		{"claude", []string{`{"type":"system","subtype":"init"}`}, "CUSTOM claude.init"},
		{"codex exec", []string{`{"type":"thread.started","thread_id":"t"}`}, "CUSTOM codex.thread_started"},
		{"codex app-server", []string{`{"id":0,"result":{}}`, `{"method":"thread/started","params":{}}`}, "CUSTOM codex.thread_started"},
		{"told late", []string{`{"level":"info"}`, `"a string"`, `{"type":"item.started","item":{"id":"i","type":"agent_message","text":"hi"}}`}, "TEXT_MESSAGE_START assistant"},
		{"fixed once told", []string{`{"type":"turn.started"}`, `{"type":"system","subtype":"init"}`}, "RAW codex-exec"},
		{"never told", []string{`{"type":"error"}`, `{"method":1}`}, "RAW agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := agui.New("r")
			var last []agui.Projected
			for i, l := range tc.lines {
				last = p.Project(agui.Message{Kind: protocol.KindEvents, Seq: uint64(i + 1), Data: []byte(l)})
			}
			if len(last) == 0 || summary(last[len(last)-1].Event) != tc.want && summary(last[0].Event) != tc.want {
				t.Errorf("the last line gave %v, want %q", last, tc.want)
			}
		})
	}
}

// TestToolCalls: a result finds its call by the agent's id; one for no
// call is passed on as it is; a call the agent asks approval for before
// printing it is told by the prompt.
func TestToolCalls(t *testing.T) {
	chain := msgs(status("started"),
		`events {"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}`,
		`events {"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a.go"}],"is_error":true}]}}`,
		`events {"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":"?"}]}}`,
		`events {"type":"control_request","request_id":"R","request":{"subtype":"can_use_tool","tool_name":"Edit","input":{"file":"x"},"tool_use_id":"t2"}}`,
		status("succeeded"))
	evs := project(agui.New("r", agui.WithDialect(agui.DialectClaude)), chain)
	got := summaries(t, evs)
	want := []string{"RUN_STARTED",
		"TEXT_MESSAGE_START assistant", "TEXT_MESSAGE_CONTENT hi", "TEXT_MESSAGE_END",
		"TOOL_CALL_START Bash", `TOOL_CALL_ARGS {"command":"ls"}`, "TOOL_CALL_END",
		"TOOL_CALL_RESULT a.go", "RAW claude",
		"TOOL_CALL_START Edit", `TOOL_CALL_ARGS {"file":"x"}`, "TOOL_CALL_END", "CUSTOM baton.approval",
		"TOOL_CALL_RESULT no result: the run ended (succeeded)", "RUN_FINISHED success"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if e := evs[4].Event; e.ParentMessageID != evs[1].Event.MessageID {
		t.Errorf("the tool call's parent is %q, want the message's text %q", e.ParentMessageID, evs[1].Event.MessageID)
	}
	if e := evs[7].Event; string(e.Metadata) != `{"isError":true}` {
		t.Errorf("an error's result has metadata %s", e.Metadata)
	}
	var approval struct{ ToolCallID string }
	_ = json.Unmarshal(evs[12].Event.Value, &approval)
	if approval.ToolCallID != evs[9].Event.ToolCallID {
		t.Errorf("the approval names tool call %q, want %q", approval.ToolCallID, evs[9].Event.ToolCallID)
	}
}

// TestSkipsSeen: a message at or before the last one read gives nothing,
// so a page read twice is harmless.
func TestSkipsSeen(t *testing.T) {
	p := agui.New("r")
	m := msgs(status("started"), "raw a")
	if len(p.Project(m[0])) != 1 || len(p.Project(m[1])) != 1 {
		t.Fatal("no events for new messages")
	}
	for _, again := range []agui.Message{m[0], m[1], {Kind: protocol.KindRaw, Data: []byte("no seq")}} {
		if evs := p.Project(again); len(evs) != 0 {
			t.Errorf("seq %d gave %v", again.Seq, evs)
		}
	}
}

func TestRestoreRefuses(t *testing.T) {
	p := agui.New("r")
	p.Project(msgs(status("started"))[0])
	for name, b := range map[string][]byte{
		"garbage":       []byte("{"),
		"another run":   agui.New("other").State(),
		"another shape": []byte(`{"v":99,"runId":"r"}`),
	} {
		if err := p.Restore(b); !errors.Is(err, agui.ErrBadState) {
			t.Errorf("%s: Restore = %v, want ErrBadState", name, err)
		}
	}
}

func TestPosition(t *testing.T) {
	for _, s := range []string{"1:0", "42:3", "18446744073709551615:7"} {
		p, err := agui.ParsePosition(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePosition(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "1", "1:", ":1", "a:1", "1:-1", "+1:2", "1:+2", "1:2:3", "-1:0"} {
		if _, err := agui.ParsePosition(s); !errors.Is(err, agui.ErrBadPosition) {
			t.Errorf("ParsePosition(%q) = %v, want ErrBadPosition", s, err)
		}
	}
	if !(agui.Position{Seq: 1, Index: 9}).Less(agui.Position{Seq: 2}) || (agui.Position{Seq: 2}).Less(agui.Position{Seq: 2}) {
		t.Error("Less does not order by sequence, then index")
	}
}

func TestParseDialect(t *testing.T) {
	for _, d := range append([]agui.Dialect{""}, agui.Dialects...) {
		if got, err := agui.ParseDialect(string(d)); got != d || err != nil {
			t.Errorf("ParseDialect(%q) = %q, %v", d, got, err)
		}
	}
	if _, err := agui.ParseDialect("gemini"); !errors.Is(err, agui.ErrUnknownDialect) || !strings.Contains(err.Error(), "codex-app-server") {
		t.Errorf("ParseDialect(gemini) = %v, want ErrUnknownDialect naming the dialects", err)
	}
}

// TestBounds: a chain that leaves ever more streams open and tool calls
// waiting (an agent's output is not to be trusted) keeps the projector's
// state bounded: the oldest are ended and given up, in order.
func TestBounds(t *testing.T) {
	chain := []string{status("started"), `events {"type":"stream_event","event":{"type":"message_start","message":{"id":"m"}}}`}
	for i := range 300 {
		chain = append(chain, fmt.Sprintf(`events {"type":"stream_event","event":{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"t%d","name":"Bash"}}}`, i, i))
	}
	p := agui.New("r", agui.WithDialect(agui.DialectClaude))
	var evs []agui.Projected
	for _, m := range msgs(chain...) {
		evs = append(evs, p.Project(m)...)
	}
	if ends := countSummaries(evs, "TOOL_CALL_END"); ends != 44 {
		t.Errorf("%d tool calls ended while 300 were open, want the 44 oldest", ends)
	}
	if n := len(p.State()); n > 64<<10 {
		t.Errorf("the state of 300 open tool calls is %d bytes", n)
	}
	evs = append(evs, p.Project(msgs(append(chain, status("succeeded"))...)[len(chain)])...)
	if err := checkStream(evs, true); err != nil {
		t.Fatal(err)
	}
	if n := countSummaries(evs, "TOOL_CALL_RESULT no result: too many tool calls were waiting for theirs"); n != 44 {
		t.Errorf("%d tool calls given up for too many waiting, want 44", n)
	}
	if n := countSummaries(evs, "TOOL_CALL_RESULT no result: the run ended (succeeded)"); n != 256 {
		t.Errorf("%d tool calls given up at the end, want 256", n)
	}
}

func countSummaries(evs []agui.Projected, s string) int {
	n := 0
	for _, e := range evs {
		if summary(e.Event) == s {
			n++
		}
	}
	return n
}

// An egress message's CUSTOM event carries its JSON as it came.
func TestEgressValue(t *testing.T) {
	const body = `{"host":"api.example.com","port":443,"method":"CONNECT","allowed":false,"reason":"not on the allowlist","secret":"","bytesOut":0,"bytesIn":0,"durationMs":0}`
	evs := project(agui.New("r"), msgs(status("started"), "egress "+body))
	last := evs[len(evs)-1].Event
	if last.Type != agui.Custom || last.Name != "baton.egress" || string(last.Value) != body {
		t.Fatalf("egress projected as %s %s %s", last.Type, last.Name, last.Value)
	}
}
