package main

import (
	"testing"

	"github.com/batonhq/baton/protocol"
)

// TestCodexEvents: `codex exec --json` lines, as Codex 0.171 prints them
// (the first six from a real run in baton's sandbox), read as one line each.
func TestCodexEvents(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"thread", `{"type":"thread.started","thread_id":"01a22ff7-1061-7ea1-9110-30b15745a0ef"}`, "⚙ thread 01a22ff7-1061-7ea1-9110-30b15745a0ef"},
		{"turn", `{"type":"turn.started"}`, "⚙ turn started"},
		{"command starts",
			`{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/sh -lc 'echo written by codex > proof.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
			"→ shell: /bin/sh -lc 'echo written by codex > proof.txt'"},
		{"command ends",
			`{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/sh -lc 'echo hi'","aggregated_output":"written by codex\n","exit_code":0,"status":"completed"}}`,
			"← result exit=0 (17 bytes)"},
		{"message", `{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done: proof.txt is written."}}`, "Done: proof.txt is written."},
		{"turn done",
			`{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":10,"reasoning_output_tokens":0}}`,
			"■ turn done  tokens in=20 out=10"},
		{"command fails",
			`{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"bwrap: No permissions to create new namespace\n","exit_code":1,"status":"failed"}}`,
			"← error exit=1 (46 bytes)"},
		{"retry", `{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion)"}`, "⚠ Reconnecting... 2/5 (stream disconnected before completion)"},
		{"reasoning", `{"type":"item.completed","item":{"id":"i","type":"reasoning","text":"**Planning** the fix"}}`, "✻ **Planning** the fix"},
		{"file change",
			`{"type":"item.completed","item":{"id":"i","type":"file_change","changes":[{"path":"/w/a.go","kind":"update"},{"path":"/w/b.go","kind":"add"}],"status":"completed"}}`,
			"→ edit: update /w/a.go, add /w/b.go completed"},
		{"web search", `{"type":"item.started","item":{"id":"i","type":"web_search","query":"go 1.26 release"}}`, "→ web search: go 1.26 release"},
		{"mcp", `{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"docs","tool":"search","status":"in_progress"}}`, "→ docs.search"},
		{"todo", `{"type":"item.updated","item":{"id":"i","type":"todo_list","items":[{"text":"a","completed":true},{"text":"b","completed":false}]}}`, "⚙ todo 1/2 done"},
		{"error item", `{"type":"item.completed","item":{"id":"i","type":"error","message":"Falling back from WebSockets to HTTPS transport."}}`, "error: Falling back from WebSockets to HTTPS transport."},
		{"turn failed", `{"type":"turn.failed","error":{"message":"stream \u001b[2J disconnected"}}`, "■ turn failed: stream \\x1b[2J disconnected"},
		{"an item type not known: JSON", `{"type":"item.completed","item":{"type":"hologram"}}`, `{"type":"item.completed","item":{"type":"hologram"}}`},
		{"a field of another shape: JSON", `{"type":"item.completed","item":{"type":"command_execution","exit_code":"zero"}}`, `{"type":"item.completed","item":{"type":"command_execution","exit_code":"zero"}}`},
		{"no item: JSON", `{"type":"item.completed"}`, `{"type":"item.completed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, false, false, evLine(protocol.KindEvents, tc.line)); got != tc.want+"\n" {
				t.Errorf("got  %q\nwant %q", got, tc.want+"\n")
			}
		})
	}
}
