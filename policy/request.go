package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// Agents, the dialects of Request.Agent.
const (
	Claude = "claude"
	Codex  = "codex"
)

// Request is a permission prompt an agent printed and waits on.
type Request struct {
	// Agent is the prompt's dialect: Claude or Codex.
	Agent string
	// ID is the prompt's id as the agent wrote it (a JSON string or
	// number): its answer must carry it back.
	ID json.RawMessage
	// Tool is what the policy matches rules' tools against: Claude's
	// tool_name; "Bash" for a Codex command, "Edit" for a Codex file
	// change.
	Tool string
	// Target is what rules' patterns match: the command, or the file path;
	// several, one a line, where a request acts on several (a Codex file
	// change's paths, a Codex command and its parsed parts).
	Target string
	// Input is Claude's tool input (an allow runs it as asked), or the
	// Codex request's params.
	Input json.RawMessage
	// ThreadID is the Codex thread the request belongs to, where a
	// follow-up turn goes.
	ThreadID string
}

// MayBeRequest is a cheap test for the hot path: false when line cannot
// be a permission prompt Reader.Request reads.
func MayBeRequest(line []byte) bool {
	return bytes.Contains(line, []byte("can_use_tool")) || bytes.Contains(line, []byte("/requestApproval"))
}

// Codex app-server methods of the prompts a Reader reads.
const (
	codexCommandApproval = "item/commandExecution/requestApproval"
	codexFileApproval    = "item/fileChange/requestApproval"
)

// maxItems bounds the file changes a Reader remembers: one is forgotten
// when its item completes, so only a misbehaving agent reaches it.
const maxItems = 1024

// Reader reads an agent's permission prompts from its lines. It is
// stateful: a Codex file-change prompt names its item, whose paths came
// earlier, in the item's item/started line, so give Observe every agent
// line, in order. A Reader is not safe for concurrent use; its zero value
// is ready.
type Reader struct {
	paths map[string][]string // a Codex fileChange item's paths, by item id
}

// Observe takes note of line: a Codex fileChange item's paths when it
// starts, and forgets them when it completes.
func (rd *Reader) Observe(line []byte) {
	if !bytes.Contains(line, []byte(`"item/`)) || !bytes.Contains(line, []byte("fileChange")) {
		return
	}
	// ItemStartedNotification / ItemCompletedNotification of Codex's
	// app-server protocol v2 (codex-rs/app-server-protocol/src/protocol/
	// v2/item.rs, ThreadItem::FileChange and FileUpdateChange):
	// {"method":"item/started","params":{"item":{"type":"fileChange","id":…,
	// "changes":[{"path":…,"kind":{"type":"update","move_path":…|null},"diff":…}],
	// "status":"inProgress"},"threadId":…,"turnId":…}}.
	var m struct {
		Method string `json:"method"`
		Params struct {
			Item struct {
				Type    string `json:"type"`
				ID      string `json:"id"`
				Changes []struct {
					Path string `json:"path"`
					Kind struct {
						MovePath string `json:"move_path"`
					} `json:"kind"`
				} `json:"changes"`
			} `json:"item"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Params.Item.Type != "fileChange" {
		return
	}
	item := m.Params.Item
	switch m.Method {
	case "item/started":
		var paths []string
		for _, c := range item.Changes {
			// A move writes its destination too.
			for _, p := range []string{c.Path, c.Kind.MovePath} {
				if p != "" && !slices.Contains(paths, p) {
					paths = append(paths, p)
				}
			}
		}
		if rd.paths == nil {
			rd.paths = map[string][]string{}
		}
		if len(rd.paths) >= maxItems {
			for k := range rd.paths {
				delete(rd.paths, k)
				break
			}
		}
		rd.paths[item.ID] = paths
	case "item/completed":
		delete(rd.paths, item.ID)
	}
}

// Request reads a permission prompt from line: Claude Code's
// control_request can_use_tool, or Codex app-server's
// item/commandExecution/requestApproval and item/fileChange/requestApproval.
// Other lines, and other Codex requests (whose answers have other
// shapes), are not.
func (rd *Reader) Request(line []byte) (Request, bool) {
	if !MayBeRequest(line) {
		return Request{}, false
	}
	var m struct {
		// Claude Code's control protocol: {"type":"control_request",
		// "request_id":…,"request":{"subtype":"can_use_tool",
		// "tool_name":…,"input":{…},…}}.
		Type      string          `json:"type"`
		RequestID json.RawMessage `json:"request_id"`
		Request   struct {
			Subtype  string          `json:"subtype"`
			ToolName string          `json:"tool_name"`
			Input    json.RawMessage `json:"input"`
		} `json:"request"`
		// Codex app-server's JSON-RPC request (no "jsonrpc" member).
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return Request{}, false
	}
	switch {
	case m.Type == "control_request" && m.Request.Subtype == "can_use_tool" && validID(m.RequestID):
		return Request{Agent: Claude, ID: m.RequestID, Tool: m.Request.ToolName,
			Target: claudeTarget(m.Request.ToolName, m.Request.Input), Input: m.Request.Input}, true
	case (m.Method == codexCommandApproval || m.Method == codexFileApproval) && validID(m.ID):
		// CommandExecutionRequestApprovalParams and
		// FileChangeRequestApprovalParams of the app-server protocol v2
		// (codex-rs/app-server-protocol/src/protocol/v2): threadId,
		// turnId, itemId, reason, and for a command command, cwd and
		// commandActions ([{"type":…,"command":…}]); a file change's
		// paths are its item's.
		var p struct {
			ThreadID       string `json:"threadId"`
			ItemID         string `json:"itemId"`
			Command        string `json:"command"`
			CommandActions []struct {
				Command string `json:"command"`
			} `json:"commandActions"`
		}
		_ = json.Unmarshal(m.Params, &p) // params of another shape leave the target empty: only bare tool rules match
		r := Request{Agent: Codex, ID: m.ID, Input: m.Params, ThreadID: p.ThreadID}
		if m.Method == codexFileApproval {
			r.Tool, r.Target = "Edit", strings.Join(rd.paths[p.ItemID], "\n")
			return r, true
		}
		// The command and each part Codex parsed out of it: every one
		// must pass, so a part the whole hides is still decided.
		var cmds []string
		add := func(c string) {
			if c != "" && !slices.Contains(cmds, c) {
				cmds = append(cmds, c)
			}
		}
		add(unwrapShell(p.Command))
		for _, a := range p.CommandActions {
			add(a.Command)
		}
		r.Tool, r.Target = "Bash", strings.Join(cmds, "\n")
		return r, true
	}
	return Request{}, false
}

// validID reports whether id is a JSON string or number, the ids both
// protocols use.
func validID(id json.RawMessage) bool {
	var v any
	if len(id) == 0 || json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// claudeTarget is what a Claude Code tool acts on, from its input.
func claudeTarget(tool string, input json.RawMessage) string {
	var in struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		Path         string `json:"path"`
		Pattern      string `json:"pattern"`
		URL          string `json:"url"`
	}
	_ = json.Unmarshal(input, &in) // an input of another shape has no target
	switch tool {
	case "Bash":
		return in.Command
	case "Read", "Write", "Edit", "MultiEdit":
		return in.FilePath
	case "NotebookEdit":
		return in.NotebookPath
	case "Glob", "Grep":
		if in.Path != "" {
			return in.Path
		}
		return in.Pattern
	case "WebFetch":
		return in.URL
	}
	return ""
}

// unwrapShell is the script of a Codex command that runs one through a
// shell, `/bin/bash -lc '<script>'` (shlex-quoted), or the command as it is.
func unwrapShell(cmd string) string {
	prog, rest, ok := strings.Cut(cmd, " ")
	if !ok {
		return cmd
	}
	switch prog[strings.LastIndexByte(prog, '/')+1:] {
	case "bash", "sh", "zsh":
	default:
		return cmd
	}
	flag, script, ok := strings.Cut(rest, " ")
	if !ok || (flag != "-lc" && flag != "-c") {
		return cmd
	}
	if word, ok := shellWord(script); ok {
		return word
	}
	return cmd
}

// shellWord unquotes s when it is exactly one POSIX shell word of quoted
// and escaped parts, as shlex writes one.
func shellWord(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case '"':
			i++
			for {
				if i >= len(s) {
					return "", false
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return "", false // an expansion: not a plain word
				}
				b.WriteByte(s[i])
				i++
			}
		case '\\':
			if i+1 >= len(s) {
				return "", false
			}
			b.WriteByte(s[i+1])
			i += 2
		default:
			if strings.IndexByte(" \t\n;&|<>()$`*?[#~=%", c) >= 0 {
				return "", false
			}
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), true
}

// ApprovalID names r within its run: its id's text when that is a plain
// token ([A-Za-z0-9_-]{1,64}), else "h" and the first 16 hex digits of
// the id's SHA-256.
func (r Request) ApprovalID() string {
	text := string(r.ID)
	var s string
	if json.Unmarshal(r.ID, &s) == nil {
		text = s
	}
	if plainToken(text) {
		return text
	}
	sum := sha256.Sum256(r.ID)
	return "h" + hex.EncodeToString(sum[:])[:16]
}

func plainToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Answer is the stdin line (without its newline) that allows or denies
// r; message is a denial's reason for the agent (Codex's decline carries
// none). Claude's allow runs the tool with its input as asked.
func (r Request) Answer(allow bool, message string) []byte {
	if r.Agent == Codex {
		decision := "decline"
		if allow {
			decision = "accept"
		}
		b, _ := json.Marshal(map[string]any{"id": r.ID, "result": map[string]string{"decision": decision}})
		return b
	}
	resp := map[string]any{"behavior": "deny", "message": message}
	if allow {
		input := r.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		resp = map[string]any{"behavior": "allow", "updatedInput": input}
	}
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": r.ID, "response": resp}})
	return b
}

// FollowUp is the stdin line (without its newline) of a new user turn
// saying text: a stream-json user message for Claude Code, a turn/start
// on r's thread for Codex app-server (its id "baton-followup-" and r's
// ApprovalID).
func (r Request) FollowUp(text string) []byte {
	if r.Agent == Codex {
		b, _ := json.Marshal(map[string]any{"method": "turn/start", "id": "baton-followup-" + r.ApprovalID(),
			"params": map[string]any{"threadId": r.ThreadID, "input": []map[string]string{{"type": "text", "text": text}}}})
		return b
	}
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]string{"role": "user", "content": text},
		"parent_tool_use_id": nil, "session_id": "default"})
	return b
}

// Settled reads a line by which an agent stops waiting on a permission
// prompt without an answer of the run's input (Claude Code's
// control_cancel_request: an interrupt withdrew it), or says that a
// prompt was settled (Codex's serverRequest/resolved, after its answer or
// an interrupt): the prompt's id, and whether it was withdrawn.
func Settled(line []byte) (id json.RawMessage, withdrawn, ok bool) {
	var m struct {
		Type      string          `json:"type"`
		RequestID json.RawMessage `json:"request_id"`
		Method    string          `json:"method"`
		Params    *struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil, false, false
	}
	switch {
	case m.Type == "control_cancel_request" && len(m.RequestID) > 0:
		return m.RequestID, true, true
	case m.Method == "serverRequest/resolved" && m.Params != nil && len(m.Params.RequestID) > 0:
		return m.Params.RequestID, false, true
	}
	return nil, false, false
}

// Answered reads an input line that answers a permission prompt: the
// prompt's id, whether it allows, and a denial's reason (Codex's
// decision).
func Answered(line []byte) (id json.RawMessage, allow bool, why string, ok bool) {
	var m struct {
		Type     string `json:"type"`
		Response *struct {
			RequestID json.RawMessage `json:"request_id"`
			Response  *struct {
				Behavior string `json:"behavior"`
				Message  string `json:"message"`
			} `json:"response"`
		} `json:"response"`
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Decision string `json:"decision"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil, false, "", false
	}
	switch {
	case m.Type == "control_response" && m.Response != nil && m.Response.Response != nil && m.Response.Response.Behavior != "":
		r := m.Response.Response
		return m.Response.RequestID, r.Behavior == "allow", r.Message, true
	case len(m.ID) > 0 && m.Result != nil && m.Result.Decision != "":
		return m.ID, strings.HasPrefix(m.Result.Decision, "accept"), m.Result.Decision, true
	}
	return nil, false, "", false
}
