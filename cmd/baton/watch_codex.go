package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// codexLine is a line of `codex exec --json`: thread.started, turn.started,
// item.started|updated|completed (agent_message, reasoning,
// command_execution, file_change, mcp_tool_call, web_search, todo_list,
// error), turn.completed, turn.failed, error.
type codexLine struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Message  string     `json:"message"`
	Item     *codexItem `json:"item"`
	Usage    *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// codexItem is the item of an item.* line.
type codexItem struct {
	Type             string `json:"type"`
	Text             string `json:"text"`
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	Message          string `json:"message"`
	Query            string `json:"query"`
	Server           string `json:"server"`
	Tool             string `json:"tool"`
	Changes          []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Items []struct {
		Completed bool `json:"completed"`
	} `json:"items"`
}

// codexEvent renders a `codex exec --json` line; it reports false for a
// line of another shape, which is then shown as JSON.
func (p *eventPrinter) codexEvent(line []byte) bool {
	var c codexLine
	if json.Unmarshal(line, &c) != nil {
		return false
	}
	text := func(s string) string { return sanitize([]byte(s), false) }
	switch c.Type {
	case "thread.started":
		p.line(p.paint(styleDim, "⚙ thread "+text(c.ThreadID)))
	case "turn.started":
		p.line(p.paint(styleDim, "⚙ turn started"))
	case "turn.completed":
		s := "■ turn done"
		if c.Usage != nil {
			s += fmt.Sprintf("  tokens in=%d out=%d", c.Usage.InputTokens, c.Usage.OutputTokens)
		}
		p.line(p.paint(styleBold+styleGreen, s))
	case "turn.failed":
		msg := ""
		if c.Error != nil {
			msg = ": " + text(c.Error.Message)
		}
		p.line(p.paint(styleBold+styleRed, "■ turn failed"+msg))
	case "error":
		p.line(p.paint(styleYellow, "⚠ "+cut(text(c.Message), 200)))
	case "item.started", "item.updated", "item.completed":
		if c.Item == nil {
			return false
		}
		return p.codexItem(c.Item, c.Type == "item.started", c.Type == "item.completed")
	default:
		return false
	}
	return true
}

// codexItem renders an item event: a tool call when it starts, its
// outcome and the assistant's text when it completes.
func (p *eventPrinter) codexItem(it *codexItem, started, completed bool) bool {
	text := func(s string) string { return sanitize([]byte(s), false) }
	switch it.Type {
	case "command_execution":
		switch {
		case started:
			p.line(p.paint(styleBlue, "→ shell: ") + cut(text(it.Command), 200))
		case completed:
			word, style := "result", styleDim
			if it.ExitCode != nil && *it.ExitCode != 0 || it.Status == "failed" || it.Status == "declined" {
				word, style = "error", styleRed
			}
			exit := ""
			if it.ExitCode != nil {
				exit = fmt.Sprintf(" exit=%d", *it.ExitCode)
			}
			p.line(p.paint(style, fmt.Sprintf("← %s%s (%d bytes)", word, exit, len(it.AggregatedOutput))))
		}
	case "agent_message":
		if completed {
			p.finish()
			p.inline(sanitize([]byte(it.Text), true))
			p.finish()
		}
	case "reasoning":
		if completed {
			p.line(p.paint(styleDim, "✻ "+cut(text(it.Text), 120)))
		}
	case "file_change":
		if completed {
			var paths []string
			for _, ch := range it.Changes {
				paths = append(paths, text(ch.Kind+" "+ch.Path))
			}
			p.line(p.paint(styleBlue, "→ edit: ") + cut(strings.Join(paths, ", "), 200) + " " + text(it.Status))
		}
	case "mcp_tool_call":
		if started {
			p.line(p.paint(styleBlue, "→ "+text(it.Server)+"."+text(it.Tool)))
		}
	case "web_search":
		if started {
			p.line(p.paint(styleBlue, "→ web search: ") + cut(text(it.Query), 200))
		}
	case "todo_list":
		done := 0
		for _, t := range it.Items {
			if t.Completed {
				done++
			}
		}
		p.line(p.paint(styleDim, fmt.Sprintf("⚙ todo %d/%d done", done, len(it.Items))))
	case "error":
		p.line(p.paint(styleRed, "error: "+cut(text(it.Message), 200)))
	default:
		return false
	}
	return true
}
