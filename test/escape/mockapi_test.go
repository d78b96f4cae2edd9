package escape

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// mockAPI is a minimal model API for the real agent CLIs: Anthropic's
// Messages API and OpenAI's Responses API, both streaming (SSE). Each
// conversation is one tool-use turn: the first request gets a tool call
// that runs `echo written by <agent> > proof.txt && cat proof.txt` and
// then secretSearch, or, where Claude offers a tool of the MCP server
// named baton (mcp__baton__<tool>), calls that tool; the request that
// carries the tool's result gets a closing text. It keeps every tool
// result it was sent, so a test sees what the agent's tool really did,
// and the credentials of every request.
type mockAPI struct {
	mu      sync.Mutex
	results []string        // tool results, as the CLIs sent them back
	paths   []string        // every request, "METHOD /path"
	prompts []string        // the user's texts of each Messages request, joined by " | "
	bodies  []string        // every model request's body, as sent
	creds   []string        // every request's credential headers (mockCreds)
	mcp     []string        // the MCP tools it called, by Claude's name
	asked   int             // the commands users asked it to run (askedCommand)
	served  map[string]bool // the texts asking them, each answered once
}

// mockCreds is how the mock records a request's credentials: its
// x-api-key (Anthropic's) and Authorization (OpenAI's Bearer) headers.
func mockCreds(apiKey, authorization string) string {
	return "x-api-key=" + apiKey + " authorization=" + authorization
}

// mockMCPPrefix starts the names Claude Code gives the tools of the MCP
// server named baton, as /etc/baton-mcp.json names it.
const mockMCPPrefix = "mcp__baton__"

// mockToolArgs are the arguments the mock calls a host tool with.
const mockToolArgs = `{"title":"Add proof.txt"}`

// mockDone is the closing text of every conversation.
const mockDone = "Done: proof.txt is written."

func mockCommand(agent string) string {
	return "echo written by " + agent + " > proof.txt && cat proof.txt"
}

// mockScript is what the mock has the agent run: mockCommand, then
// secretSearch, in the agent's own sandbox with the agent running.
func mockScript(agent string) string { return mockCommand(agent) + "\n" + secretSearch }

func (m *mockAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	m.mu.Lock()
	m.paths = append(m.paths, r.Method+" "+r.URL.Path)
	m.creds = append(m.creds, mockCreds(r.Header.Get("X-Api-Key"), r.Header.Get("Authorization")))
	if r.Method == http.MethodPost {
		m.bodies = append(m.bodies, string(body))
	}
	m.mu.Unlock()
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		m.messages(w, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		m.responses(w, body)
	default:
		// Codex tries a WebSocket first (GET /v1/responses) and falls back
		// to HTTP; other probes get nothing either.
		http.NotFound(w, r)
	}
}

// credentials is every request's mockCreds, in order.
func (m *mockAPI) credentials() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.creds...)
}

// mcpCalls is the MCP tools the mock called, in order.
func (m *mockAPI) mcpCalls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.mcp...)
}

func (m *mockAPI) toolResults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.results...)
}

// userPrompts is, per Messages request, the texts of its messages joined
// by " | ".
func (m *mockAPI) userPrompts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.prompts...)
}

// userTexts joins the texts of messages (a plain string content, or its
// text blocks) with " | ".
func userTexts(messages []struct {
	Content json.RawMessage `json:"content"`
}) string {
	var texts []string
	for _, msg := range messages {
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			texts = append(texts, s)
			continue
		}
		var blocks []struct{ Type, Text string }
		_ = json.Unmarshal(msg.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	return strings.Join(texts, " | ")
}

// requestBodies is every model request's body, in order.
func (m *mockAPI) requestBodies() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

func (m *mockAPI) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.paths...)
}

func sse(w http.ResponseWriter, event string, data map[string]any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// messages serves Anthropic's POST /v1/messages with stream: true.
func (m *mockAPI) messages(w http.ResponseWriter, body []byte) {
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.prompts = append(m.prompts, userTexts(req.Messages))
	m.mu.Unlock()
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks) // a plain string has no blocks
	answered := false
	for _, b := range blocks {
		if b.Type == "tool_result" {
			answered = true
			m.mu.Lock()
			m.results = append(m.results, string(b.Content))
			m.mu.Unlock()
		}
	}
	// The user's last request to run a command gets one tool use: Claude
	// Code sends its tool's result and the user's next message together,
	// results first, so the conversation alone does not say which came
	// last.
	asked := ""
	if text := lastAsking(body); text != "" {
		m.mu.Lock()
		if !m.served[text] {
			if m.served == nil {
				m.served = map[string]bool{}
			}
			m.served[text], asked = true, askedCommand(text)
		}
		m.mu.Unlock()
	}
	bash, mcp := false, ""
	for _, t := range req.Tools {
		bash = bash || t.Name == "Bash"
		if mcp == "" && strings.HasPrefix(t.Name, mockMCPPrefix) {
			mcp = t.Name
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-mock", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	block := func(start, delta map[string]any) {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	stop := "end_turn"
	switch {
	case bash && asked != "":
		input, _ := json.Marshal(map[string]string{"command": asked, "description": "Run what the user asked"})
		// An id of its own each time: Claude Code keeps one tool use per id.
		m.mu.Lock()
		m.asked++
		id := fmt.Sprintf("toolu_mock_asked_%d", m.asked)
		m.mu.Unlock()
		block(map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}},
			map[string]any{"type": "input_json_delta", "partial_json": string(input)})
		stop = "tool_use"
	case answered:
		block(map[string]any{"type": "text", "text": ""}, map[string]any{"type": "text_delta", "text": mockDone})
	case mcp != "":
		m.mu.Lock()
		m.mcp = append(m.mcp, mcp)
		m.mu.Unlock()
		block(map[string]any{"type": "tool_use", "id": "toolu_mock_mcp", "name": mcp, "input": map[string]any{}},
			map[string]any{"type": "input_json_delta", "partial_json": mockToolArgs})
		stop = "tool_use"
	case bash:
		input, _ := json.Marshal(map[string]string{"command": mockScript("claude"), "description": "Write proof.txt"})
		block(map[string]any{"type": "tool_use", "id": "toolu_mock", "name": "Bash", "input": map[string]any{}},
			map[string]any{"type": "input_json_delta", "partial_json": string(input)})
		stop = "tool_use"
	default:
		block(map[string]any{"type": "text", "text": ""}, map[string]any{"type": "text_delta", "text": mockDone})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 20}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// lastAsking is the last text of the user's that asks the mock to run a
// command (askedCommand), or "".
func lastAsking(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	last := ""
	for _, msg := range req.Messages {
		if msg.Role != "user" {
			continue
		}
		var texts []string
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			texts = []string{s}
		} else {
			var blocks []struct{ Type, Text string }
			_ = json.Unmarshal(msg.Content, &blocks)
			for _, b := range blocks {
				if b.Type == "text" {
					texts = append(texts, b.Text)
				}
			}
		}
		for _, t := range texts {
			if askedCommand(t) != "" {
				last = t
			}
		}
	}
	return last
}

// askedCommand is the command a user's turn asks the mock to run: the
// rest of a line "run: CMD", or, in baton's follow-up after a person
// allowed a held request ("Your earlier request to use Bash (CMD) was
// approved by …"), CMD again; "" for any other turn.
func askedCommand(text string) string {
	for line := range strings.Lines(text) {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "run: "); ok {
			return cmd
		}
	}
	if _, rest, ok := strings.Cut(text, "to use Bash ("); ok {
		if cmd, _, ok := strings.Cut(rest, ") was approved by "); ok {
			return cmd
		}
	}
	return ""
}

// responseTool is a tool of a Responses API request; namespaces nest them.
type responseTool struct {
	Type  string         `json:"type"`
	Name  string         `json:"name"`
	Tools []responseTool `json:"tools"`
}

// responses serves OpenAI's POST /v1/responses with stream: true. Codex
// offers its shell in one of three shapes, depending on its version and
// model: code mode (a custom tool "exec" running JavaScript that calls
// tools.exec_command), exec_command, or shell; the mock calls the one
// offered.
func (m *mockAPI) responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Tools []responseTool `json:"tools"`
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
			Tools  []responseTool  `json:"tools"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	offered := map[string]bool{}
	var walk func([]responseTool)
	walk = func(ts []responseTool) {
		for _, t := range ts {
			offered[t.Type+":"+t.Name] = true
			walk(t.Tools)
		}
	}
	walk(req.Tools)
	answered := false
	for _, in := range req.Input {
		walk(in.Tools) // additional_tools items
		if in.Type == "function_call_output" || in.Type == "custom_tool_call_output" {
			answered = true
			m.mu.Lock()
			m.results = append(m.results, string(in.Output))
			m.mu.Unlock()
		}
	}
	cmd := mockScript("codex")
	var call map[string]any
	switch {
	case answered:
	case offered["custom:exec"]:
		js, _ := json.Marshal(map[string]string{"cmd": cmd})
		call = map[string]any{"type": "custom_tool_call", "id": "ctc_mock", "call_id": "call_mock", "name": "exec",
			"input": "const r = await tools.exec_command(" + string(js) + ");\ntext(r);\n"}
	case offered["function:exec_command"]:
		args, _ := json.Marshal(map[string]string{"cmd": cmd})
		call = map[string]any{"type": "function_call", "id": "fc_mock", "call_id": "call_mock", "name": "exec_command", "arguments": string(args)}
	default:
		args, _ := json.Marshal(map[string]any{"command": []string{"bash", "-lc", cmd}})
		call = map[string]any{"type": "function_call", "id": "fc_mock", "call_id": "call_mock", "name": "shell", "arguments": string(args)}
	}
	if call == nil {
		call = map[string]any{"type": "message", "role": "assistant", "id": "msg_mock",
			"content": []any{map[string]any{"type": "output_text", "text": mockDone}}}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_mock"}})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "item": call})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_mock",
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}})
}

// resultText is the text of a tool result as a CLI sent it: a JSON
// string, or text blocks; anything else as it is.
func resultText(raw string) string {
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	if json.Unmarshal([]byte(raw), &blocks) == nil {
		var b strings.Builder
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	return raw
}

// hasResult reports whether one of results holds want.
func hasResult(results []string, want string) bool {
	for _, r := range results {
		if strings.Contains(r, want) {
			return true
		}
	}
	return false
}
