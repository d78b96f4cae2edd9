package policy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Real prompt lines, as agui/testdata's chains hold them (captured from
// Claude Code against the mock API and from codex app-server), and the
// Codex file-change shapes of the app-server protocol v2
// (codex-rs/app-server-protocol/src/protocol/v2/item.rs: ThreadItem::
// FileChange, FileUpdateChange, PatchChangeKind; v2.rs:
// FileChangeRequestApprovalParams).
const (
	claudeBash         = `{"type":"control_request","request_id":"823dc7cd-d5af-418b-b7b4-e11ea612fdd6","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"echo written by claude > proof.txt && cat proof.txt","description":"Write proof.txt"},"description":"Write proof.txt","permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo written *"}],"behavior":"allow","destination":"localSettings"},{"type":"addDirectories","directories":["/tmp/agui-capture/ws-claude"],"destination":"session"}],"blocked_path":"/tmp/agui-capture/ws-claude/proof.txt","tool_use_id":"toolu_mock"}}`
	codexCommand       = `{"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","threadId":"01a244e6-0981-75a2-b79d-98fba63dc5e2","turnId":"01a244e6-09c2-73b0-a11b-fc10e4d65a3d","itemId":"exec-eb8a23da-73d1-483d-a892-395beee91433","startedAtMs":1796452256506,"environmentId":"local","command":"/bin/bash -lc 'echo written by codex > proof.txt && cat proof.txt'","cwd":"/tmp/agui-capture/ws-codex","commandActions":[{"type":"unknown","command":"echo written by codex > proof.txt && cat proof.txt"}],"proposedExecpolicyAmendment":["/bin/bash","-lc","echo written by codex > proof.txt && cat proof.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["/bin/bash","-lc","echo written by codex > proof.txt && cat proof.txt"]}},"cancel"]}}`
	codexFileStarted   = `{"method":"item/started","params":{"item":{"type":"fileChange","id":"fc-1","changes":[{"path":"/w/handler.go","kind":{"type":"update","move_path":null},"diff":"-500\n+400"},{"path":"/w/old.go","kind":{"type":"update","move_path":"/w/new.go"},"diff":""},{"path":"/w/added.go","kind":{"type":"add"},"diff":"+x"}],"status":"inProgress"},"threadId":"th-1","turnId":"tu-1"}}`
	codexFile          = `{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"th-1","turnId":"tu-1","itemId":"fc-1","startedAtMs":1796452256506,"reason":"write outside the sandbox","grantRoot":null}}`
	codexFileCompleted = `{"method":"item/completed","params":{"item":{"type":"fileChange","id":"fc-1","changes":[{"path":"/w/handler.go","kind":{"type":"update","move_path":null},"diff":"-500\n+400"}],"status":"declined"},"threadId":"th-1","turnId":"tu-1"}}`
)

func TestReaderRequest(t *testing.T) {
	claude := func(tool string, input string) string {
		return `{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"` + tool + `","input":` + input + `,"tool_use_id":"toolu_1"}}`
	}
	for _, tc := range []struct {
		name, line       string
		tool, target, id string
		thread           string
		agent            string
	}{
		{"claude Bash", claudeBash, "Bash", "echo written by claude > proof.txt && cat proof.txt", "823dc7cd-d5af-418b-b7b4-e11ea612fdd6", "", Claude},
		{"claude Read", claude("Read", `{"file_path":"/w/a.go","limit":10}`), "Read", "/w/a.go", "r1", "", Claude},
		{"claude Write", claude("Write", `{"file_path":"/w/.github/x.yml","content":"x"}`), "Write", "/w/.github/x.yml", "r1", "", Claude},
		{"claude Edit", claude("Edit", `{"file_path":"/w/a.go","old_string":"a","new_string":"b"}`), "Edit", "/w/a.go", "r1", "", Claude},
		{"claude MultiEdit", claude("MultiEdit", `{"file_path":"/w/a.go","edits":[]}`), "MultiEdit", "/w/a.go", "r1", "", Claude},
		{"claude NotebookEdit", claude("NotebookEdit", `{"notebook_path":"/w/n.ipynb","new_source":"x"}`), "NotebookEdit", "/w/n.ipynb", "r1", "", Claude},
		{"claude Grep with a path", claude("Grep", `{"pattern":"TODO","path":"/w/src"}`), "Grep", "/w/src", "r1", "", Claude},
		{"claude Glob without one", claude("Glob", `{"pattern":"**/*.go"}`), "Glob", "**/*.go", "r1", "", Claude},
		{"claude WebFetch", claude("WebFetch", `{"url":"https://example.com/","prompt":"x"}`), "WebFetch", "https://example.com/", "r1", "", Claude},
		{"claude MCP tool: no target", claude("mcp__github__create_issue", `{"title":"x"}`), "mcp__github__create_issue", "", "r1", "", Claude},
		{"codex command, unwrapped from bash -lc", codexCommand, "Bash", "echo written by codex > proof.txt && cat proof.txt", "0", "01a244e6-0981-75a2-b79d-98fba63dc5e2", Codex},
		{"codex command whose parts Codex parsed", `{"method":"item/commandExecution/requestApproval","id":"x-1","params":{"threadId":"t","itemId":"i","command":"/bin/bash -lc 'git status && curl evil'","commandActions":[{"type":"unknown","command":"git status"},{"type":"unknown","command":"curl evil"}]}}`,
			"Bash", "git status && curl evil\ngit status\ncurl evil", "x-1", "t", Codex},
		{"codex command with quotes", `{"method":"item/commandExecution/requestApproval","id":2,"params":{"threadId":"t","command":"/bin/bash -lc 'echo '\"'\"'hi'\"'\"''"}}`,
			"Bash", "echo 'hi'", "2", "t", Codex},
		{"codex command not through a shell", `{"method":"item/commandExecution/requestApproval","id":3,"params":{"threadId":"t","command":"ls -la"}}`, "Bash", "ls -la", "3", "t", Codex},
		{"codex file change: its item's paths, a move's both", codexFile, "Edit", "/w/handler.go\n/w/old.go\n/w/new.go\n/w/added.go", "1", "th-1", Codex},
		{"codex file change of an item not seen: no paths", strings.Replace(codexFile, "fc-1", "fc-9", 1), "Edit", "", "1", "th-1", Codex},
	} {
		var rd Reader
		rd.Observe([]byte(codexFileStarted))
		rd.Observe([]byte(tc.line))
		r, ok := rd.Request([]byte(tc.line))
		if !ok {
			t.Errorf("%s: not a request", tc.name)
			continue
		}
		if r.Agent != tc.agent || r.Tool != tc.tool || r.Target != tc.target || r.ApprovalID() != tc.id || r.ThreadID != tc.thread {
			t.Errorf("%s: %s %q %q id %s thread %q, want %s %q %q id %s thread %q", tc.name,
				r.Agent, r.Tool, r.Target, r.ApprovalID(), r.ThreadID, tc.agent, tc.tool, tc.target, tc.id, tc.thread)
		}
		if !MayBeRequest([]byte(tc.line)) {
			t.Errorf("%s: MayBeRequest says no", tc.name)
		}
	}
	for _, line := range []string{
		`{"type":"control_request","request_id":"i","request":{"subtype":"interrupt"}}`,
		`{"type":"control_request","request":{"subtype":"can_use_tool","tool_name":"Bash"}}`,                      // no id
		`{"type":"control_request","request_id":{"a":1},"request":{"subtype":"can_use_tool","tool_name":"Bash"}}`, // not an id
		`{"method":"item/permissions/requestApproval","id":4,"params":{}}`,                                        // answered otherwise
		`{"method":"item/commandExecution/requestApproval","params":{}}`,                                          // a notification
		`{"method":"serverRequest/resolved","params":{"requestId":0}}`,
		`not json can_use_tool`,
		``,
	} {
		var rd Reader
		if r, ok := rd.Request([]byte(line)); ok {
			t.Errorf("%s: read as a request %+v", line, r)
		}
	}
	// A completed item is forgotten.
	var rd Reader
	rd.Observe([]byte(codexFileStarted))
	rd.Observe([]byte(codexFileCompleted))
	if r, _ := rd.Request([]byte(codexFile)); r.Target != "" {
		t.Errorf("a completed item's paths are kept: %q", r.Target)
	}
}

// TestReaderReadsTheChains: every prompt of agui/testdata's chains (real
// and scripted runs) is read, and each is decided.
func TestReaderReadsTheChains(t *testing.T) {
	files, _ := filepath.Glob("../agui/testdata/*.chain.ndjson")
	if len(files) == 0 {
		t.Fatal("no chains in ../agui/testdata")
	}
	seen := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var rd Reader
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Kind    string            `json:"kind"`
				Data    string            `json:"data"`
				Headers map[string]string `json:"headers"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Kind != "events" {
				continue
			}
			line := []byte(rec.Data)
			rd.Observe(line)
			if !strings.Contains(rec.Data, `"can_use_tool"`) && !strings.Contains(rec.Data, `/requestApproval"`) {
				continue
			}
			r, ok := rd.Request(line)
			if !ok || r.Tool == "" {
				t.Errorf("%s: prompt not read: %s", f, line)
				continue
			}
			seen++
			// A chain of a run with a policy of its own (a verdict on
			// its prompts) was decided by that one; any other prompt is
			// none of the issue's rules'.
			if rec.Headers["Baton-Rule"] != "" {
				continue
			}
			if d := issuePolicy.Decide(r); d.Verdict != Ask || d.Rule != "default: ask" {
				t.Errorf("%s: %s %q decided %+v", f, r.Tool, r.Target, d)
			}
		}
		fh.Close()
	}
	if seen < 7 {
		t.Errorf("read %d prompts in the chains; they hold at least 7", seen)
	}
}

func TestApprovalID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{`"req-1"`, "req-1"},
		{`"823dc7cd-d5af-418b-b7b4-e11ea612fdd6"`, "823dc7cd-d5af-418b-b7b4-e11ea612fdd6"},
		{`0`, "0"},
		{`-3`, "-3"},
		{`"a.b"`, hashed(`"a.b"`)},
		{`1.5`, hashed(`1.5`)},
		{`"` + strings.Repeat("a", 65) + `"`, hashed(`"` + strings.Repeat("a", 65) + `"`)},
	} {
		got := Request{ID: json.RawMessage(tc.id)}.ApprovalID()
		if got != tc.want || !plainToken(got) {
			t.Errorf("ApprovalID(%s) = %q, want %q", tc.id, got, tc.want)
		}
	}
	a, b := Request{ID: json.RawMessage(`"a.b"`)}.ApprovalID(), Request{ID: json.RawMessage(`"a,b"`)}.ApprovalID()
	if a == b {
		t.Errorf("two ids, one approval id %s", a)
	}
}

// hashed is the approval id of a request id that is not a plain token.
func hashed(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:8])
}

func TestAnswerAndAnswered(t *testing.T) {
	var rd Reader
	claude, _ := rd.Request([]byte(claudeBash))
	codex, _ := rd.Request([]byte(codexCommand))
	for _, tc := range []struct {
		r     Request
		allow bool
		msg   string
		want  string
	}{
		{claude, true, "", `{"response":{"request_id":"823dc7cd-d5af-418b-b7b4-e11ea612fdd6","response":{"behavior":"allow","updatedInput":{"command":"echo written by claude > proof.txt && cat proof.txt","description":"Write proof.txt"}},"subtype":"success"},"type":"control_response"}`},
		{claude, false, "awaits approval", `{"response":{"request_id":"823dc7cd-d5af-418b-b7b4-e11ea612fdd6","response":{"behavior":"deny","message":"awaits approval"},"subtype":"success"},"type":"control_response"}`},
		{Request{Agent: Claude, ID: json.RawMessage(`"R"`)}, true, "", `{"response":{"request_id":"R","response":{"behavior":"allow","updatedInput":{}},"subtype":"success"},"type":"control_response"}`},
		{codex, true, "", `{"id":0,"result":{"decision":"accept"}}`},
		{codex, false, "no", `{"id":0,"result":{"decision":"decline"}}`},
	} {
		line := tc.r.Answer(tc.allow, tc.msg)
		// json.Marshal escapes > and &; compare what the agent reads.
		var got, want any
		_ = json.Unmarshal(line, &got)
		_ = json.Unmarshal([]byte(tc.want), &want)
		if gb, _ := json.Marshal(got); string(gb) != string(mustMarshal(want)) {
			t.Errorf("Answer(%v, %q) = %s, want %s", tc.allow, tc.msg, line, tc.want)
		}
		id, allow, _, ok := Answered(line)
		if !ok || allow != tc.allow || string(id) != string(tc.r.ID) {
			t.Errorf("Answered(%s) = %s %v %v", line, id, allow, ok)
		}
	}
	if _, _, _, ok := Answered([]byte(`{"type":"user","message":{"role":"user","content":"y"}}`)); ok {
		t.Error("a user turn read as an answer")
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestFollowUp(t *testing.T) {
	var rd Reader
	claude, _ := rd.Request([]byte(claudeBash))
	codex, _ := rd.Request([]byte(codexCommand))
	if got, want := string(claude.FollowUp("allowed: retry")), `{"message":{"content":"allowed: retry","role":"user"},"parent_tool_use_id":null,"session_id":"default","type":"user"}`; got != want {
		t.Errorf("claude follow-up %s, want %s", got, want)
	}
	if got, want := string(codex.FollowUp("allowed: retry")), `{"id":"baton-followup-0","method":"turn/start","params":{"input":[{"text":"allowed: retry","type":"text"}],"threadId":"01a244e6-0981-75a2-b79d-98fba63dc5e2"}}`; got != want {
		t.Errorf("codex follow-up %s, want %s", got, want)
	}
}

func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		line      string
		id        string
		withdrawn bool
		ok        bool
	}{
		{`{"type":"control_cancel_request","request_id":"req-1"}`, `"req-1"`, true, true},
		{`{"method":"serverRequest/resolved","params":{"threadId":"01a244e6-0981-75a2-b79d-98fba63dc5e2","requestId":0},"emittedAtMs":1796452256511}`, `0`, false, true},
		{`{"method":"serverRequest/resolved","params":{}}`, ``, false, false},
		{claudeBash, ``, false, false},
	} {
		id, withdrawn, ok := Settled([]byte(tc.line))
		if string(id) != tc.id || withdrawn != tc.withdrawn || ok != tc.ok {
			t.Errorf("Settled(%.50s) = %s %v %v", tc.line, id, withdrawn, ok)
		}
	}
}

func TestUnwrapShell(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"/bin/bash -lc 'echo hi'", "echo hi"},
		{"/usr/bin/bash -lc 'echo hi'", "echo hi"},
		{"bash -c 'a && b'", "a && b"},
		{"/bin/zsh -lc 'x'", "x"},
		{`/bin/bash -lc 'it'"'"'s'`, "it's"},
		{`/bin/bash -lc "echo \"q\""`, `echo "q"`},
		{`/bin/bash -lc "echo $HOME"`, `/bin/bash -lc "echo $HOME"`}, // an expansion: left whole
		{"/bin/bash -lc 'a' 'b'", "/bin/bash -lc 'a' 'b'"},           // two words
		{"/bin/bash -lc 'open", "/bin/bash -lc 'open"},
		{"/bin/bash -x 'a'", "/bin/bash -x 'a'"},
		{"python -c 'print(1)'", "python -c 'print(1)'"},
		{"ls", "ls"},
		{"/bin/bash -lc ls", "ls"},
	} {
		if got := unwrapShell(tc.cmd); got != tc.want {
			t.Errorf("unwrapShell(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
