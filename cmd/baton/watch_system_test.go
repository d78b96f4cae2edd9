package main

import (
	"testing"

	"github.com/batonhq/baton/protocol"
)

// TestSystemEvents: Claude Code's system lines, shaped as 2.1.197 prints
// them, read as one line each, not as raw JSON.
func TestSystemEvents(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"init",
			`{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Task","Bash","Edit"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"bypassPermissions","slash_commands":["init"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","output_style":"default","agents":["Explore"],"uuid":"u1"}`,
			"⚙ session  model=claude-opus-4-8[1m] permissions=bypassPermissions cwd=/w version=2.1.197 tools=3"},
		{"task started",
			`{"type":"system","subtype":"task_started","task_id":"a1b2","tool_use_id":"toolu_1","description":"Find the upload handler","subagent_type":"Explore","task_type":"local_agent","prompt":"Look for...","session_id":"s1","uuid":"u2"}`,
			"⚙ task started: Find the upload handler  type=local_agent agent=Explore id=a1b2"},
		{"task progress",
			`{"type":"system","subtype":"task_progress","task_id":"a1b2","tool_use_id":"toolu_1","description":"Find the upload handler","subagent_type":"Explore","usage":{"total_tokens":5120,"tool_uses":3,"duration_ms":4200},"session_id":"s1","uuid":"u3"}`,
			"⚙ task progress: Find the upload handler  tools=3 tokens=5120 4.2s"},
		{"task notification",
			`{"type":"system","subtype":"task_notification","task_id":"a1b2","tool_use_id":"toolu_1","status":"completed","output_file":"","summary":"Found handler.go:42","usage":{"total_tokens":8000,"tool_uses":5,"duration_ms":12000},"session_id":"s1","uuid":"u4"}`,
			"⚙ task completed: Found handler.go:42  tools=5 tokens=8000 12.0s id=a1b2"},
		{"session state changed",
			`{"type":"system","subtype":"session_state_changed","state":"idle","session_id":"s1","uuid":"u5"}`,
			"⚙ session idle"},
		{"session waiting on the user",
			`{"type":"system","subtype":"session_state_changed","state":"requires_action","waiting_on_user":true,"session_id":"s1"}`,
			"⚙ session requires_action  waiting_on_user=true"},
		{"api retry",
			`{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1150,"error_status":529,"error":"overloaded_error","session_id":"s1","uuid":"u6"}`,
			"⚙ API retry 2/10: 529 overloaded_error  in 1.1s"},
		{"status", `{"type":"system","subtype":"status","status":"compacting","session_id":"s1"}`, "⚙ status: compacting"},
		{"compact boundary",
			`{"type":"system","subtype":"compact_boundary","session_id":"s1","uuid":"u7","compact_metadata":{"trigger":"auto","pre_tokens":151234}}`,
			"⚙ context compacted  trigger=auto tokens_before=151234"},
		{"hook response",
			`{"type":"system","subtype":"hook_response","hook_id":"h1","hook_name":"PreToolUse:Bash","hook_event":"PreToolUse","output":"","stdout":"","stderr":"","exit_code":0,"outcome":"success","session_id":"s1"}`,
			"⚙ hook response: PreToolUse PreToolUse:Bash  exit=0 outcome=success"},
		{"a subtype not known yet shows its plain fields",
			`{"type":"system","subtype":"memory_saved","path":"/w/.claude/m.md","bytes":120,"nested":{"x":1},"session_id":"s1","uuid":"u8"}`,
			"⚙ memory saved  bytes=120 path=/w/.claude/m.md"},
		{"control characters in fields are escaped",
			`{"type":"system","subtype":"task_started","description":"a\u001b[2Jb","task_id":"t"}`,
			"⚙ task started: a\\x1b[2Jb  id=t"},
		{"no subtype: JSON", `{"type":"system","state":"x"}`, `{"type":"system","state":"x"}`},
		{"subtype not a string: JSON", `{"type":"system","subtype":7}`, `{"type":"system","subtype":7}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, false, false, evLine(protocol.KindEvents, tc.line)); got != tc.want+"\n" {
				t.Errorf("got  %q\nwant %q", got, tc.want+"\n")
			}
		})
	}
}
