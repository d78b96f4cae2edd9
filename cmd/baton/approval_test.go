package main

import (
	"testing"

	"github.com/batonhq/baton/policy"
)

func TestPromptReplies(t *testing.T) {
	claude := `{"type":"control_request","request_id":"R","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make test"}}}`
	codex := `{"method":"item/fileChange/requestApproval","id":7,"params":{"reason":"write a.go"}}`
	for _, tc := range []struct {
		prompt, typed, want string
	}{
		{claude, "y", `{"response":{"request_id":"R","response":{"behavior":"allow","updatedInput":{"command":"make test"}},"subtype":"success"},"type":"control_response"}`},
		{claude, " Allow ", `{"response":{"request_id":"R","response":{"behavior":"allow","updatedInput":{"command":"make test"}},"subtype":"success"},"type":"control_response"}`},
		{claude, "n", `{"response":{"request_id":"R","response":{"behavior":"deny","message":"denied by the user"},"subtype":"success"},"type":"control_response"}`},
		{claude, "no  not on main", `{"response":{"request_id":"R","response":{"behavior":"deny","message":"not on main"},"subtype":"success"},"type":"control_response"}`},
		{claude, "yes please", `{"response":{"request_id":"R","response":{"behavior":"allow","updatedInput":{"command":"make test"}},"subtype":"success"},"type":"control_response"}`},
		{claude, "maybe", ""},
		{claude, "", ""},
		{codex, "y", `{"id":7,"result":{"decision":"accept"}}`},
		{codex, "deny", `{"id":7,"result":{"decision":"decline"}}`},
		{"", "y", ""}, // no prompt waits
		{`{"type":"control_request","request_id":"R","request":{"subtype":"interrupt"}}`, "y", ""},
		{`{"method":"turn/completed","id":3}`, "y", ""},
	} {
		var p prompts
		var rd policy.Reader
		if a, ok := rd.Request([]byte(tc.prompt)); ok {
			p.add(a)
		}
		if got := string(p.reply(tc.typed)); got != tc.want {
			t.Errorf("prompt %.40s, typed %q: sends %s, want %s", tc.prompt, tc.typed, got, tc.want)
		}
	}
	// An answer, from anyone, settles its prompt.
	var p prompts
	var rd policy.Reader
	a, _ := rd.Request([]byte(claude))
	p.add(a)
	if id, allow, _, ok := policy.Answered(a.Answer(false, "x")); !ok || allow {
		t.Fatalf("answered(deny) = %s %v %v", id, allow, ok)
	} else {
		p.resolve(id)
	}
	if got := p.reply("y"); got != nil {
		t.Fatalf("a settled prompt is answered again: %s", got)
	}
}
