package agui

import (
	"encoding/json"
	"strings"
)

// item is a Codex item, from either dialect, in the terms the projection
// needs: a text, a reasoning, or a tool call with its arguments and, once
// completed, its output.
type item struct {
	ID     string
	Kind   kind // "" when the projection does not translate it
	Text   string
	Name   string
	Args   json.RawMessage
	Output string
	Failed bool
}

// itemStarted opens what an item starts: a text or a reasoning (with what
// it already holds), or a whole tool call, which then waits for its
// result.
func (p *Projector) itemStarted(it item, line []byte, source string) {
	key := "item:" + it.ID
	switch it.Kind {
	case kindText, kindReasoning:
		p.itemText(it, key)
	case kindTool:
		if p.toolID(it.ID) == "" {
			p.tool(it.ID, it.Name, it.Args)
		}
	default:
		p.raw(line, source)
	}
}

// itemText sends what a text or reasoning item holds beyond what was
// sent, opening it first. An item whose text does not begin with what was
// sent (rewritten) sends nothing more.
func (p *Projector) itemText(it item, key string) *entity {
	e := p.open(key)
	if e == nil {
		if it.Kind == kindText {
			e = p.startText(key)
		} else {
			e = p.startReasoning(key)
		}
	}
	if len(it.Text) > e.Sent && fnvAdd(fnvOffset, it.Text[:e.Sent]) == e.Sum {
		e = p.send(key, it.Text[e.Sent:])
	}
	return e
}

// itemDelta appends a streamed piece of a text or reasoning item.
func (p *Projector) itemDelta(id string, k kind, delta string) {
	key := "item:" + id
	if p.open(key) == nil {
		p.itemText(item{ID: id, Kind: k}, key)
	}
	p.send(key, delta)
}

// send sends text on the open item stream key and counts it sent.
func (p *Projector) send(key, text string) *entity {
	p.delta(p.open(key), text)
	e := p.open(key)
	e.Sent += len(text)
	e.Sum = fnvAdd(e.Sum, text)
	return e
}

// itemCompleted ends a text or reasoning item with what it adds, or gives
// a tool call its result (starting it first when its start was not
// seen).
func (p *Projector) itemCompleted(it item, line []byte, source string) {
	key := "item:" + it.ID
	switch it.Kind {
	case kindText, kindReasoning:
		p.itemText(it, key)
		p.end(key)
	case kindTool:
		p.itemStarted(it, line, source)
		p.result(it.ID, it.Output, it.Failed, line, source)
	default:
		p.raw(line, source)
	}
}

// codexExecLine is a line of `codex exec --json`.
type codexExecLine struct {
	Type  string         `json:"type"`
	Item  *codexExecItem `json:"item"`
	Usage *struct {
		InputTokens           int64 `json:"input_tokens"`
		CachedInputTokens     int64 `json:"cached_input_tokens"`
		CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
		OutputTokens          int64 `json:"output_tokens"`
		ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type codexExecItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string          `json:"query"`
	Items json.RawMessage `json:"items"`
}

// codexExec projects a `codex exec --json` line (see doc.go's table).
func (p *Projector) codexExec(line []byte) {
	const src = string(DialectCodexExec)
	var l codexExecLine
	if json.Unmarshal(line, &l) != nil {
		p.raw(line, src)
		return
	}
	switch {
	case l.Type == "thread.started":
		p.custom("codex.thread_started", compact(line))
	case (l.Type == "item.started" || l.Type == "item.updated" || l.Type == "item.completed") && l.Item != nil && l.Item.ID != "":
		it := l.Item.item()
		switch {
		case l.Type == "item.completed":
			p.itemCompleted(it, line, src)
		case it.Kind == kindTool && l.Type == "item.updated":
			// A tool's interim state: its result comes when it completes.
		default:
			p.itemStarted(it, line, src)
		}
	case l.Type == "turn.completed":
		t := turn{}
		if u := l.Usage; u != nil {
			t.Usage = []TokenUsage{{Provider: "openai", InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				TotalTokens: u.InputTokens + u.OutputTokens, ReasoningTokens: u.ReasoningOutputTokens,
				CachedInputTokens: u.CachedInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens}}
		}
		p.turnEnd(line, t)
	case l.Type == "turn.failed":
		t := turn{Code: "turn.failed", Error: "the turn failed"}
		if l.Error != nil && l.Error.Message != "" {
			t.Error = l.Error.Message
		}
		p.turnEnd(line, t)
	default:
		// turn.started, and error lines (Codex's retries; a fatal one is
		// followed by turn.failed).
		p.raw(line, src)
	}
}

// item translates an exec item: agent_message and reasoning are texts;
// command_execution, file_change, mcp_tool_call, web_search and
// todo_list tool calls.
func (c *codexExecItem) item() item {
	it := item{ID: c.ID, Text: c.Text, Kind: kindTool}
	switch c.Type {
	case "agent_message":
		it.Kind = kindText
	case "reasoning":
		it.Kind = kindReasoning
	case "command_execution":
		it.Name, it.Args = "shell", mustJSON(map[string]string{"command": c.Command})
		it.Output = c.AggregatedOutput
		it.Failed = c.Status == "failed" || c.Status == "declined" || c.ExitCode != nil && *c.ExitCode != 0
	case "file_change":
		it.Name, it.Args = "file_change", objectOf("changes", c.Changes)
		it.Output, it.Failed = changesText(c.Changes)+c.Status, c.Status == "failed"
	case "mcp_tool_call":
		it.Name, it.Args = c.Server+"."+c.Tool, orEmptyObject(c.Arguments)
		it.Output, it.Failed = mcpText(c.Result), c.Status == "failed" || c.Error != nil
		if c.Error != nil {
			it.Output = c.Error.Message
		}
	case "web_search":
		it.Name, it.Args = "web_search", mustJSON(map[string]string{"query": c.Query})
	case "todo_list":
		it.Name, it.Args = "todo_list", objectOf("items", c.Items)
		it.Output = todoText(c.Items)
	default:
		it.Kind = ""
	}
	return it
}

// codexAppLine is a JSON-RPC message of `codex app-server`.
type codexAppLine struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		Item   *codexAppItem `json:"item"`
		ItemID string        `json:"itemId"`
		Delta  string        `json:"delta"`
		Turn   *struct {
			Status string `json:"status"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"turn"`
		TokenUsage *struct {
			Last struct {
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
				ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
				TotalTokens           int64 `json:"totalTokens"`
			} `json:"last"`
		} `json:"tokenUsage"`
	} `json:"params"`
}

type codexAppItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Summary          json.RawMessage `json:"summary"`
	Content          json.RawMessage `json:"content"`
	Command          string          `json:"command"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string `json:"query"`
}

// codexApp projects a `codex app-server` JSON-RPC message (see doc.go's
// table).
func (p *Projector) codexApp(line []byte) {
	const src = string(DialectCodexAppServer)
	var l codexAppLine
	if json.Unmarshal(line, &l) != nil {
		p.raw(line, src)
		return
	}
	switch m := l.Method; {
	case m == "thread/started":
		p.custom("codex.thread_started", compact(line))
	case (m == "item/started" || m == "item/completed") && l.Params.Item != nil && l.Params.Item.ID != "":
		it := l.Params.Item.item()
		switch {
		case l.Params.Item.Type == "userMessage":
			// The user's turn: its input on the chain told it.
		case m == "item/completed":
			p.itemCompleted(it, line, src)
		default:
			p.itemStarted(it, line, src)
		}
	case m == "item/agentMessage/delta" && l.Params.ItemID != "":
		p.itemDelta(l.Params.ItemID, kindText, l.Params.Delta)
	case (m == "item/reasoning/summaryTextDelta" || m == "item/reasoning/textDelta") && l.Params.ItemID != "":
		p.itemDelta(l.Params.ItemID, kindReasoning, l.Params.Delta)
	case m == "item/commandExecution/outputDelta" || m == "item/fileChange/outputDelta" || m == "item/reasoning/summaryPartAdded":
		// Told whole when the item completes.
	case strings.HasSuffix(m, "requestApproval") && l.ID != nil:
		p.prompt(approval{Dialect: DialectCodexAppServer, RequestID: compact(l.ID),
			ToolCallID: p.toolID(l.Params.ItemID), ToolName: approvalTool(m), Request: compact(line)}, line)
	case m == "thread/tokenUsage/updated" && l.Params.TokenUsage != nil:
		u := l.Params.TokenUsage.Last
		if p.st.Turn == nil {
			p.st.Turn = &turn{}
		}
		if len(p.st.Turn.Usage) == 0 {
			p.st.Turn.Usage = []TokenUsage{{Provider: "openai"}}
		}
		p.st.Turn.Usage[0].add(TokenUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			ReasoningTokens: u.ReasoningOutputTokens, CachedInputTokens: u.CachedInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens})
	case m == "turn/completed" && l.Params.Turn != nil:
		t := turn{Cancelled: l.Params.Turn.Status == "interrupted"}
		if l.Params.Turn.Status == "failed" {
			t.Code, t.Error = "failed", "the turn failed"
			if e := l.Params.Turn.Error; e != nil && e.Message != "" {
				t.Error = e.Message
			}
		}
		p.turnEnd(line, t)
	default:
		p.raw(line, src)
	}
}

// approvalTool names the tool a requestApproval method asks for.
func approvalTool(method string) string {
	switch {
	case strings.HasPrefix(method, "item/commandExecution/"):
		return "shell"
	case strings.HasPrefix(method, "item/fileChange/"):
		return "file_change"
	}
	return ""
}

// item translates an app-server item, as codexExecItem.item does.
func (c *codexAppItem) item() item {
	it := item{ID: c.ID, Kind: kindTool}
	switch c.Type {
	case "agentMessage":
		it.Kind, it.Text = kindText, c.Text
	case "reasoning":
		it.Kind = kindReasoning
		it.Text = joinStrings(c.Summary)
		if it.Text == "" {
			it.Text = joinStrings(c.Content)
		}
	case "commandExecution":
		it.Name, it.Args = "shell", mustJSON(map[string]string{"command": c.Command})
		if c.AggregatedOutput != nil {
			it.Output = *c.AggregatedOutput
		}
		it.Failed = c.Status == "failed" || c.Status == "declined" || c.ExitCode != nil && *c.ExitCode != 0
		if c.Status == "declined" && it.Output == "" {
			it.Output = "declined"
		}
	case "fileChange":
		it.Name, it.Args = "file_change", objectOf("changes", c.Changes)
		it.Output, it.Failed = changesText(c.Changes)+c.Status, c.Status == "failed" || c.Status == "declined"
	case "mcpToolCall":
		it.Name, it.Args = c.Server+"."+c.Tool, orEmptyObject(c.Arguments)
		it.Output, it.Failed = mcpText(c.Result), c.Status == "failed" || c.Error != nil
		if c.Error != nil {
			it.Output = c.Error.Message
		}
	case "webSearch":
		it.Name, it.Args = "web_search", mustJSON(map[string]string{"query": c.Query})
	default:
		it.Kind = ""
	}
	return it
}

// joinStrings joins a JSON array's strings with blank lines, as the
// summary parts of a reasoning read.
func joinStrings(v json.RawMessage) string {
	var ss []string
	_ = json.Unmarshal(v, &ss)
	return strings.Join(ss, "\n\n")
}

// objectOf is {"<key>": v}, v being null when absent or not JSON.
func objectOf(key string, v json.RawMessage) json.RawMessage {
	if len(v) == 0 || !json.Valid(v) {
		v = json.RawMessage("null")
	}
	return mustJSON(map[string]json.RawMessage{key: compact(v)})
}

func orEmptyObject(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || !json.Valid(v) {
		return json.RawMessage("{}")
	}
	return compact(v)
}

// changesText lists a file change's paths, one per line, each after its
// kind (a string, or an object's type).
func changesText(changes json.RawMessage) string {
	var cs []struct {
		Path string          `json:"path"`
		Kind json.RawMessage `json:"kind"`
	}
	_ = json.Unmarshal(changes, &cs)
	var b strings.Builder
	for _, c := range cs {
		var k string
		if json.Unmarshal(c.Kind, &k) != nil {
			var o struct{ Type string }
			_ = json.Unmarshal(c.Kind, &o)
			k = o.Type
		}
		b.WriteString(k + " " + c.Path + "\n")
	}
	return b.String()
}

// mcpText is the text of an MCP tool's result content.
func mcpText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// todoText lists a todo list's items as "[x] text" lines.
func todoText(items json.RawMessage) string {
	var is []struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	}
	_ = json.Unmarshal(items, &is)
	var b strings.Builder
	for _, i := range is {
		b.WriteString("[" + map[bool]string{true: "x", false: " "}[i.Completed] + "] " + i.Text + "\n")
	}
	return b.String()
}
