package agui

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// claudeLine is the part of a Claude Code stream-json line the
// projection reads.
type claudeLine struct {
	Type            string             `json:"type"`
	Subtype         string             `json:"subtype"`
	ParentToolUseID *string            `json:"parent_tool_use_id"`
	Event           *claudeStreamEvent `json:"event"`
	Message         *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// result
	IsError        bool                        `json:"is_error"`
	Result         json.RawMessage             `json:"result"`
	Errors         []string                    `json:"errors"`
	TerminalReason string                      `json:"terminal_reason"`
	Usage          *claudeUsage                `json:"usage"`
	ModelUsage     map[string]claudeModelUsage `json:"modelUsage"`
	// control_request, control_cancel_request
	RequestID string `json:"request_id"`
	Request   *struct {
		Subtype   string          `json:"subtype"`
		ToolName  string          `json:"tool_name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
	} `json:"request"`
}

type claudeStreamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"`
	ContentBlock *claudeBlock `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

// claudeBlock is a content block of an assistant or user message.
type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

type claudeModelUsage struct {
	InputTokens              int64 `json:"inputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
}

// claude projects a Claude Code stream-json line (see doc.go's table).
func (p *Projector) claude(line []byte) {
	var l claudeLine
	if json.Unmarshal(line, &l) != nil || l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		// A sub-agent's lines (parent_tool_use_id) are its own
		// conversation, not the run's: passed on as they are.
		p.raw(line, string(DialectClaude))
		return
	}
	switch {
	case l.Type == "system" && l.Subtype == "init":
		p.custom("claude.init", compact(line))
	case l.Type == "stream_event" && l.Event != nil:
		p.claudeStream(l.Event, line)
	case l.Type == "assistant" && l.Message != nil:
		p.claudeAssistant(l.Message.ID, l.Message.Content, line)
	case l.Type == "user" && l.Message != nil:
		p.claudeUser(l.Message.Content, line)
	case l.Type == "result":
		p.turnEnd(line, claudeTurn(l))
	case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "can_use_tool":
		if r := l.Request; r.ToolUseID != "" && p.toolID(r.ToolUseID) == "" {
			// Asked before its tool_use was printed (baton's fake agent
			// does): the prompt is the call's only account.
			p.tool(r.ToolUseID, r.ToolName, orEmptyObject(r.Input))
		}
		p.prompt(approval{Dialect: DialectClaude, RequestID: mustJSON(l.RequestID),
			ToolCallID: p.toolID(l.Request.ToolUseID), ToolName: l.Request.ToolName, Input: l.Request.Input, Request: compact(line)}, line)
	case l.Type == "control_cancel_request":
		p.custom("baton.approval_cancelled", map[string]json.RawMessage{"requestId": mustJSON(l.RequestID)})
	default:
		p.raw(line, string(DialectClaude))
	}
}

// claudeStream projects a partial message's stream event: blocks start,
// grow and stop by index; the message's whole lines then add only what
// was not streamed (claudeAssistant).
func (p *Projector) claudeStream(e *claudeStreamEvent, line []byte) {
	key := "block:" + strconv.Itoa(e.Index)
	switch e.Type {
	case "message_start":
		p.endBlocks()
		p.st.Msg, p.st.Streamed, p.st.Parent = "", true, ""
		if e.Message != nil {
			p.st.Msg = e.Message.ID
		}
	case "content_block_start":
		if e.ContentBlock == nil {
			break
		}
		p.end(key)
		switch b := e.ContentBlock; b.Type {
		case "text":
			p.delta(p.startText(key), b.Text)
		case "thinking":
			p.delta(p.startReasoning(key), b.Thinking)
		case "tool_use", "server_tool_use", "mcp_tool_use":
			p.startTool(key, b.ID, b.Name)
		default:
			p.raw(line, string(DialectClaude))
		}
	case "content_block_delta":
		o := p.open(key)
		if o == nil || e.Delta == nil {
			break
		}
		switch e.Delta.Type {
		case "text_delta":
			p.delta(o, e.Delta.Text)
		case "thinking_delta":
			p.delta(o, e.Delta.Thinking)
		case "input_json_delta":
			p.delta(o, e.Delta.PartialJSON)
		}
	case "content_block_stop":
		p.end(key)
	case "message_delta", "message_stop":
		// Stop reason and usage: the result line has the turn's.
	default:
		p.raw(line, string(DialectClaude))
	}
}

// endBlocks ends what a partial message left open.
func (p *Projector) endBlocks() {
	for i := 0; i < len(p.st.Open); {
		if strings.HasPrefix(p.st.Open[i].Key, "block:") {
			p.end(p.st.Open[i].Key)
			continue
		}
		i++
	}
}

// claudeAssistant projects a whole assistant message (Claude Code prints
// one line per content block, each with the message's id). With partial
// messages its content was streamed already, but for a tool call not
// streamed (baton's fake agent streams only its text).
func (p *Projector) claudeAssistant(id string, content json.RawMessage, line []byte) {
	streamed := p.st.Streamed && id == p.st.Msg
	if !streamed && (id != p.st.Msg || p.st.Streamed) {
		p.st.Msg, p.st.Streamed, p.st.Parent = id, false, ""
	}
	var blocks []claudeBlock
	if json.Unmarshal(content, &blocks) != nil {
		p.raw(line, string(DialectClaude))
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if streamed || b.Text == "" {
				continue
			}
			e := p.startText("whole")
			p.delta(e, b.Text)
			p.end("whole")
		case "thinking":
			if streamed || b.Thinking == "" {
				continue
			}
			e := p.startReasoning("whole")
			p.delta(e, b.Thinking)
			p.end("whole")
		case "tool_use", "server_tool_use", "mcp_tool_use":
			if streamed && p.known(b.ID) {
				continue
			}
			p.tool(b.ID, b.Name, orEmptyObject(b.Input))
		}
	}
}

// claudeUser projects a user line of the agent's output: its tool
// results. The user's own turns come from the chain's inputs.
func (p *Projector) claudeUser(content json.RawMessage, line []byte) {
	var blocks []claudeBlock
	_ = json.Unmarshal(content, &blocks)
	results := 0
	for _, b := range blocks {
		if b.Type == "tool_result" {
			results++
			p.result(b.ToolUseID, blockText(b.Content), b.IsError, line, string(DialectClaude))
		}
	}
	if results == 0 {
		p.raw(line, string(DialectClaude))
	}
}

// claudeTurn reads a result line: an error unless it succeeded or only
// reached its turn limit (the reference adapter's 'length'), cancelled
// when its terminal reason says it was aborted, and the usage per model.
func claudeTurn(l claudeLine) turn {
	t := turn{Cancelled: strings.HasPrefix(l.TerminalReason, "aborted")}
	if l.IsError && l.Subtype != "error_max_turns" {
		t.Code = l.Subtype
		var s string
		_ = json.Unmarshal(l.Result, &s)
		switch {
		case len(l.Errors) > 0:
			t.Error = strings.Join(l.Errors, "; ")
		case s != "":
			t.Error = s
		default:
			t.Error = l.Subtype
		}
		if t.Error == "" {
			t.Error = "the turn failed"
		}
	}
	models := make([]string, 0, len(l.ModelUsage))
	for m := range l.ModelUsage {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		u := l.ModelUsage[m]
		t.Usage = append(t.Usage, anthropicUsage(m, u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens))
	}
	if len(t.Usage) == 0 && l.Usage != nil {
		u := l.Usage
		t.Usage = []TokenUsage{anthropicUsage("", u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)}
	}
	return t
}

// anthropicUsage converts Anthropic's counts, whose input excludes the
// cache's reads and writes, to AG-UI's, whose input includes them.
func anthropicUsage(model string, input, cacheRead, cacheWrite, output int64) TokenUsage {
	in := input + cacheRead + cacheWrite
	return TokenUsage{Provider: "anthropic", Model: model, InputTokens: in, OutputTokens: output, TotalTokens: in + output,
		CachedInputTokens: cacheRead, CacheWriteInputTokens: cacheWrite}
}
