package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

func evLine(kind protocol.RunKind, data string) client.Event {
	return client.Event{Kind: kind, Data: []byte(data)}
}

func evStatus(t *testing.T, js string) client.Event {
	t.Helper()
	st, err := protocol.ParseStatus([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return client.Event{Kind: protocol.KindStatus, Data: []byte(js), Status: &st}
}

// evEgress is an egress event as client.Watch decodes it.
func evEgress(js string) client.Event {
	ev := evLine(protocol.KindEgress, js)
	var e journal.Egress
	if json.Unmarshal([]byte(js), &e) == nil {
		ev.Egress = &e
	}
	return ev
}

func render(t *testing.T, asJSON, color bool, evs ...client.Event) string {
	t.Helper()
	var b bytes.Buffer
	p := &eventPrinter{w: &b, json: asJSON, color: color}
	for _, ev := range evs {
		if err := p.print(ev); err != nil {
			t.Fatal(err)
		}
	}
	p.finish()
	return b.String()
}

func TestHumanFormat(t *testing.T) {
	const (
		ev  = protocol.KindEvents
		raw = protocol.KindRaw
	)
	delta := func(s string) client.Event {
		return evLine(ev, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}}`)
	}
	for _, tc := range []struct {
		name string
		evs  []client.Event
		want string
	}{
		{"tool call and answers", []client.Event{
			evLine(protocol.KindTool, `{"call":1,"phase":"call","name":"deploy","args":{"env":"prod"}}`),
			evLine(protocol.KindTool, `{"call":1,"phase":"result","name":"deploy","result":"deployed\u001b[2J v42"}`),
			evLine(protocol.KindTool, `{"call":2,"phase":"result","name":"create_pr","error":"tool create_pr failed (409): exists"}`)},
			"tool › deploy #1 {\"env\":\"prod\"}\ntool › deploy #1 → deployed\\x1b[2J v42\ntool › create_pr #2 ✗ tool create_pr failed (409): exists\n"},
		{"started status", []client.Event{evStatus(t, `{"status":"started","runId":"r","worker":"w1","node":"n1","epoch":12,"offset":0,"time":"2026-01-01T00:00:00Z"}`)},
			"● started  worker=w1 node=n1 epoch=12\n"},
		{"terminal status with stderr tail", []client.Event{evStatus(t, `{"status":"failed","runId":"r","worker":"w1","offset":9,"exitCode":2,"reason":"exit","stderrTail":"boom\nbang\u001b[2J\n","time":"2026-01-01T00:00:00Z"}`)},
			"● failed  worker=w1 exit=2 reason=exit\n  stderr:\n    boom\n    bang\\x1b[2J\n"},
		{"terminal status lists its outputs", []client.Event{evStatus(t, `{"status":"succeeded","runId":"r","offset":9,"exitCode":0,"time":"2026-01-01T00:00:00Z",`+
			`"outputs":[{"name":"r/diff.patch","size":2048,"digest":"SHA-256=x"},{"name":"r/files/ab12","path":"src/a.go","size":12,"digest":"SHA-256=y"}],`+
			`"outputsError":"outputs limit of 1 MiB reached","outputsNotes":["skipped fifo p"]}`)},
			"● succeeded  exit=0\n  outputs (2; baton outputs r --get NAME):\n    diff.patch  2.0 KiB\n    files/src/a.go  12 B\n" +
				"  outputs cut short: outputs limit of 1 MiB reached\n  outputs: skipped fifo p\n"},
		{"text deltas inline, then the full message is not repeated", []client.Event{
			delta("Hel"), delta("lo\\nwor"), delta("ld"),
			evLine(ev, `{"type":"stream_event","event":{"type":"content_block_stop","index":0}}`),
			evLine(ev, `{"type":"assistant","message":{"content":[{"type":"text","text":"Hello\nworld"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls -la"}}]}}`),
		}, "Hello\nworld\n→ Bash: ls -la\n"},
		{"assistant text without deltas", []client.Event{
			evLine(ev, `{"type":"assistant","message":{"content":[{"type":"text","text":"Hi there"}]}}`),
			evLine(ev, `{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":"/w/a.go"}}]}}`),
			evLine(ev, `{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Custom","input":{"n": 1}}]}}`),
		}, "Hi there\n→ Read: /w/a.go\n→ Custom: {\"n\":1}\n"},
		{"tool results", []client.Event{
			evLine(ev, `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"abc"}]}}`),
			evLine(ev, `{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"12345"}],"is_error":true}]}}`),
		}, "← result (3 bytes)\n← error (5 bytes)\n"},
		{"result summary", []client.Event{
			evLine(ev, `{"type":"result","subtype":"success","is_error":false,"duration_ms":12345,"num_turns":3,"result":"done","total_cost_usd":0.0123}`),
			evLine(ev, `{"type":"result","subtype":"error_max_turns","is_error":true}`),
		}, "■ done success  turns=3  12.3s  $0.0123\n■ error error_max_turns\n"},
		{"egress", []client.Event{
			evEgress(`{"host":"api.example.com","port":443,"method":"CONNECT","allowed":true,"secret":"","bytesOut":2048,"bytesIn":10,"durationMs":1500}`),
			evEgress(`{"host":"evil.example\u001b[2J","port":80,"method":"GET","allowed":false,"reason":"name \"evil.example\" is not on the allowlist","secret":""}`),
			evEgress(`{"host":"::1","port":22,"method":"CONNECT","allowed":false,"reason":"no","secret":""}`),
			evEgress(`{"allowed":false,"secret":"","note":"further egress not recorded"}`),
			evLine(protocol.KindEgress, "not json"),
		}, "egress ✓ CONNECT api.example.com:443 ↑ 2.0 KiB ↓ 10 B in 1.5s\n" +
			"egress ✗ GET evil.example\\x1b[2J:80 refused: name \"evil.example\" is not on the allowlist\n" +
			"egress ✗ CONNECT [::1]:22 refused: no\n" +
			"egress: further egress not recorded\n" +
			"egress│ not json\n"},
		{"other JSON is compacted", []client.Event{evLine(ev, "{ \"type\" : \"system\",\n \"tools\": [ 1, 2 ] }\n")},
			`{"type":"system","tools":[1,2]}` + "\n"},
		{"user prompt text is other JSON", []client.Event{evLine(ev, `{"type":"user","message":{"content":"hi"}}`)},
			`{"type":"user","message":{"content":"hi"}}` + "\n"},
		{"malformed JSON on events", []client.Event{evLine(ev, `{"type":"assistant",`)}, `raw│ {"type":"assistant",` + "\n"},
		{"wrong shapes fall back to compact JSON", []client.Event{
			evLine(ev, `{"type":"assistant","message":{"content":"not blocks"}}`),
			evLine(ev, `[1,2]`),
			evLine(ev, `"str"`),
		}, `{"type":"assistant","message":{"content":"not blocks"}}` + "\n[1,2]\n\"str\"\n"},
		{"raw line", []client.Event{evLine(raw, "plain text\n")}, "raw│ plain text\n"},
		{"invalid UTF-8 and control bytes are escaped", []client.Event{evLine(raw, "a\xffb\x1b[31mred\x07\r\tz\u0085")},
			"raw│ a\\xffb\\x1b[31mred\\x07\\r\\tz\\u0085\n"},
		{"invalid UTF-8 inside JSON strings", []client.Event{evLine(ev, "{\"type\":\"x\",\"s\":\"\xff\"}")},
			"{\"type\":\"x\",\"s\":\"\\xff\"}\n"},
		{"streamed text is sanitized but keeps lines", []client.Event{delta(`a\u001b]0;pwned\u0007\tb\n`)},
			"a\\x1b]0;pwned\\x07\tb\n"},
		{"a line after open streamed text starts on its own line", []client.Event{
			delta("partial"),
			evStatus(t, `{"status":"handoff","runId":"r","worker":"w1","offset":5,"time":"2026-01-01T00:00:00Z"}`),
		}, "partial\n● handoff  worker=w1\n"},
		{"input: a user message is the user's turn", []client.Event{
			evLine(protocol.KindInput, `{"type":"user","message":{"role":"user","content":"Add a test\u001b[2J"},"session_id":"default"}`+"\n"),
			evLine(protocol.KindInput, `{"type":"user","message":{"content":[{"type":"text","text":"one"},{"type":"image"},{"type":"text","text":" two"}]}}`),
			evLine(protocol.KindInput, "plain text line\n"),
		}, "you › Add a test\\x1b[2J\nyou › one two\nyou › plain text line\n"},
		{"input: other lines as written", []client.Event{
			evLine(protocol.KindInput, `{"type":"control_response","response":{"subtype":"success"}}`+"\n"),
			evLine(protocol.KindInput, `{"type":"user","message":{"content":[{"type":"image"}]}}`),
			evLine(protocol.KindInput, `{"type":"user","message":{"content":7}}`),
			evLine(protocol.KindInput, ""),
		}, `input│ {"type":"control_response","response":{"subtype":"success"}}` + "\n" +
			`input│ {"type":"user","message":{"content":[{"type":"image"}]}}` + "\n" +
			`input│ {"type":"user","message":{"content":7}}` + "\ninput│ \n"},
		{"input: end of input, and an interrupt", []client.Event{
			{Kind: protocol.KindInput, EOF: true},
			{Kind: protocol.KindInput, Data: []byte("last words\n"), EOF: true},
			{Kind: protocol.KindInput, Interrupt: true},
			{Kind: protocol.KindInput, Data: []byte(`{"type":"control_request","request_id":"baton-interrupt","request":{"subtype":"interrupt"}}` + "\n"), Interrupt: true},
		}, "you › end of input (the agent's stdin is closed)\nyou › last words\nyou › end of input (the agent's stdin is closed)\n" +
			"you › interrupt\nyou › interrupt\n"},
		{"permission prompts and their answers, one line each", []client.Event{
			evLine(ev, `{"type":"control_request","request_id":"req-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make test\u001b[2J","description":"run"},"tool_use_id":"t"}}`),
			evLine(protocol.KindInput, `{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow","updatedInput":{"command":"make test"}}}}`),
			evLine(protocol.KindInput, `{"type":"control_response","response":{"subtype":"success","request_id":"req-2","response":{"behavior":"deny","message":"not now"}}}`),
			evLine(ev, `{"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","command":"/usr/bin/bash -lc 'echo hi'"}}`),
			evLine(protocol.KindInput, `{"id":0,"result":{"decision":"accept"}}`),
			evLine(protocol.KindInput, `{"id":1,"result":{"decision":"decline"}}`),
		}, "? Bash asks: make test\\x1b[2J  [request req-1]\nyou › allow req-1\nyou › deny req-2: not now\n" +
			"? Bash asks: echo hi  [request 0]\nyou › allow 0\nyou › deny 1: decline\n"},
		{"a prompt withdrawn by an interrupt, the agent's answers to control requests, its own notes", []client.Event{
			evLine(ev, `{"type":"control_cancel_request","request_id":"req-1"}`),
			evLine(ev, `{"type":"control_response","response":{"subtype":"success","request_id":"baton-interrupt"}}`),
			evLine(ev, `{"type":"control_response","response":{"subtype":"error","request_id":"i2","error":"no turn\u001b[2J"}}`),
			evLine(ev, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"session_id":"s"}`),
			evLine(ev, `{"method":"serverRequest/resolved","params":{"threadId":"t","requestId":0}}`),
		}, "? request req-1 withdrawn: the agent no longer waits for its answer\n↳ the agent took request baton-interrupt\n" +
			"↳ the agent refused request i2: no turn\\x1b[2J\n↳ [Request interrupted by user for tool use]\n  request 0 settled\n"},
		{"message on an unknown subject kind", []client.Event{evLine("ctl", "x\x00y")}, "ctl│ x\\x00y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, false, false, tc.evs...); got != tc.want {
				t.Errorf("got:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

func TestJSONFormatIsUnchanged(t *testing.T) {
	st := `{"status":"succeeded","runId":"r","offset":3,"exitCode":0,"time":"2026-01-01T00:00:00Z"}`
	got := render(t, true, false,
		evLine(protocol.KindEvents, `{"a": 1}`),
		evLine(protocol.KindRaw, "bytes \xff\x1b as they are"),
		evLine(protocol.KindEvents, "{\"with\":\"newline\"}\n"),
		evStatus(t, st))
	want := "{\"a\": 1}\nbytes \xff\x1b as they are\n{\"with\":\"newline\"}\n" + st + "\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestColorOnlyWhenAsked(t *testing.T) {
	st := evStatus(t, `{"status":"succeeded","runId":"r","offset":0,"exitCode":0,"time":"2026-01-01T00:00:00Z"}`)
	if got := render(t, false, true, st); !strings.Contains(got, styleGreen+"● succeeded"+styleReset) {
		t.Errorf("colored status %q lacks green", got)
	}
	if got := render(t, false, false, st); strings.Contains(got, "\x1b") {
		t.Errorf("uncolored status %q has escape codes", got)
	}
	if useColor(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"this is too long", 10, "this is t…"},
		{"ééééééé", 4, "ééé…"},
	} {
		if got := cut(tc.s, tc.n); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	long := strings.Repeat("\xff", 500)
	if got := payloadPreview([]byte(long), 60); utf8.RuneCountInString(got) != 60 || !strings.HasSuffix(got, "…") {
		t.Errorf("payloadPreview of 500 bad bytes = %q, want 60 characters ending in …", got)
	}
	if got := payloadPreview([]byte("{\"a\":\n1}"), 60); got != `{"a":\n1}` {
		t.Errorf("payloadPreview = %q", got)
	}
}

// FuzzHumanFormat: whatever an agent prints, the human output is valid
// UTF-8 with no control character but newline and tab, so it cannot drive
// the terminal.
func FuzzHumanFormat(f *testing.F) {
	for _, s := range []string{
		`{"type":"assistant","message":{"content":[{"type":"text","text":"\u001b[2J"}]}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"\u009b"}}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}}`,
		`{"type":"result","subtype":"\u0007","is_error":true,"num_turns":-1}`,
		`{"type":"system","subtype":"task_\u009bstarted","description":"\u001b]0;x","usage":{"duration_ms":"x"}}`,
		`{"type":"system","subtype":"api_retry","attempt":1e400,"error":{"a":1}}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"\u001b[2J\u0085"}}`,
		`{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"\u0007","kind":"\u009b"}]}}`,
		"{\"type\":\"x\",\"s\":\"\xff\"}", "plain \x1b[31m", "\xff\xfe", "",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data string, asRaw bool) {
		kind := protocol.KindEvents
		if asRaw {
			kind = protocol.KindRaw
		}
		out := render(t, false, false, evLine(kind, data)) + render(t, false, false, evLine(protocol.KindInput, data))
		if !utf8.ValidString(out) {
			t.Fatalf("output is not UTF-8: %q", out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) {
				t.Fatalf("output has control character %U: %q", r, out)
			}
		}
	})
}
