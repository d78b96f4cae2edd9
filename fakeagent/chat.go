package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Chat is the fake agent's conversation mode (`baton fake-agent --chat`),
// shaped like Claude Code with `--input-format stream-json`: it reads one
// message per stdin line and answers each user message with a turn that
// ends in a {"type":"result"} line, until stdin ends.
//
//   - A user message (stream-json, or a plain text line) "hello" gets an
//     assistant message "echo: hello".
//   - "approve: CMD" asks for permission first: a control_request
//     can_use_tool for Bash with command CMD; the turn waits for the
//     control_response with the same request_id and reports the tool as
//     run ("ran: CMD") if it allows, or refused with its message if it
//     denies.
//     An interrupt line while it waits withdraws the prompt, as Claude
//     Code does: a control_cancel_request for it, the interrupt's
//     control_response, a user message "[Request interrupted by user for
//     tool use]" and a result with terminal_reason "aborted_tools".
//   - "write: PATH" asks the same way for Claude Code's Write of PATH
//     (input file_path), and "codex: CMD" asks as Codex app-server does,
//     a JSON-RPC item/commandExecution/requestApproval with command CMD,
//     answered by {"id":…,"result":{"decision":"accept"|"decline"}}.
//   - A user message that asks to retry ("… Please retry it now.", the
//     follow-up baton sends once a person allowed a held request) asks
//     the last denied request again.
//   - "slow" starts a turn that writes a progress line every 100 ms for
//     up to a minute, until it is interrupted: by a control_request
//     interrupt line (answered with a control_response) or by a value on
//     interrupts (SIGINT). Its result then has terminal_reason
//     "aborted_streaming".
//
// It returns nil at the end of stdin, a write error, or ctx's cause.
func Chat(ctx context.Context, stdin io.Reader, stdout io.Writer, interrupts <-chan struct{}) error {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- append([]byte(nil), sc.Bytes()...):
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	c := &chat{out: stdout, lines: lines, interrupts: interrupts, ctx: ctx}
	if err := c.emit(map[string]any{"type": "system", "subtype": "init", "session_id": "fake-session", "tools": []string{"Bash"}}); err != nil {
		return err
	}
	for {
		line, ok, err := c.next()
		if err != nil {
			return err
		}
		if !ok {
			if err := <-readErr; err != nil {
				return fmt.Errorf("fakeagent: read stdin: %w", err)
			}
			return nil
		}
		if err := c.turn(line); err != nil {
			return err
		}
	}
}

type chat struct {
	ctx        context.Context
	out        io.Writer
	lines      <-chan []byte
	interrupts <-chan struct{}
	turns      int
	// denied is the last request denied: a follow-up asks it again.
	denied func() error
}

// chatMessage is the part of a stdin line the fake agent reads.
type chatMessage struct {
	Type      string          `json:"type"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Response  struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message"`
		} `json:"response"`
	} `json:"response"`
	Message struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// A Codex app-server answer, or turn/start request.
	Method string `json:"method"`
	Params struct {
		Input []struct{ Text string } `json:"input"`
	} `json:"params"`
	ID     json.RawMessage `json:"id"`
	Result struct {
		Decision string `json:"decision"`
	} `json:"result"`
}

// parseChat reads a stdin line: a stream-json message, or plain text as a
// user message.
func parseChat(line []byte) (m chatMessage, text string) {
	if err := json.Unmarshal(line, &m); err != nil || m.Type == "" && m.ID == nil {
		return chatMessage{Type: "user"}, string(line)
	}
	if m.Type == "" && m.Method == "turn/start" {
		m.Type = "user"
		for _, in := range m.Params.Input {
			text += in.Text
		}
		return m, text
	}
	if m.Type == "" {
		m.Type = "jsonrpc_response"
	}
	if m.Type == "user" {
		if err := json.Unmarshal(m.Message.Content, &text); err != nil {
			var blocks []struct {
				Type, Text string
			}
			_ = json.Unmarshal(m.Message.Content, &blocks)
			for _, b := range blocks {
				text += b.Text
			}
		}
	}
	return m, text
}

func (c *chat) next() ([]byte, bool, error) {
	select {
	case l, ok := <-c.lines:
		return l, ok, nil
	case <-c.ctx.Done():
		return nil, false, context.Cause(c.ctx)
	}
}

func (c *chat) emit(v any) error {
	b, _ := json.Marshal(v)
	if _, err := c.out.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("fakeagent: write stdout: %w", err)
	}
	return nil
}

func (c *chat) say(text string) error {
	return c.emit(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant",
		"content": []map[string]string{{"type": "text", "text": text}}}})
}

func (c *chat) result(text, reason string) error {
	subtype := "success"
	if reason != "completed" {
		subtype = "error_during_execution"
	}
	return c.emit(map[string]any{"type": "result", "subtype": subtype, "is_error": reason != "completed",
		"num_turns": c.turns, "result": text, "terminal_reason": reason, "session_id": "fake-session"})
}

// turn answers one stdin line.
func (c *chat) turn(line []byte) error {
	m, text := parseChat(line)
	switch m.Type {
	case "user":
	case "control_request":
		// An interrupt with no turn running: nothing to stop.
		return c.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m.RequestID}})
	default:
		return nil // control_response with nothing waiting, and the like
	}
	c.turns++
	switch {
	case strings.HasPrefix(text, "approve: "):
		cmd := strings.TrimPrefix(text, "approve: ")
		return c.approval("Bash", map[string]string{"command": cmd}, cmd)
	case strings.HasPrefix(text, "write: "):
		path := strings.TrimPrefix(text, "write: ")
		return c.approval("Write", map[string]string{"file_path": path, "content": "written by the fake agent\n"}, "write "+path)
	case strings.HasPrefix(text, "codex: "):
		return c.codexApproval(strings.TrimPrefix(text, "codex: "))
	case strings.HasSuffix(text, "Please retry it now."):
		if c.denied == nil {
			c.denied = c.deniedBefore()
		}
		if c.denied == nil {
			break
		}
		retry := c.denied
		c.denied = nil
		return retry()
	case text == "slow":
		return c.slow()
	}
	if err := c.say("echo: " + text); err != nil {
		return err
	}
	return c.result("echo: "+text, "completed")
}

// approval asks to use tool with input, which does what, and acts on the
// answer.
func (c *chat) approval(name string, input map[string]string, what string) error {
	id := fmt.Sprintf("req-%d", c.turns)
	tool := fmt.Sprintf("toolu_%d", c.turns)
	if err := c.emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": name, "input": input, "tool_use_id": tool}}); err != nil {
		return err
	}
	cmd := what
	for {
		line, ok, err := c.next()
		if err != nil {
			return err
		}
		if !ok {
			return c.result("stdin ended while waiting for permission", "aborted_tools")
		}
		m, _ := parseChat(line)
		if isInterrupt(m) {
			return c.withdraw(id, m.RequestID)
		}
		if m.Type != "control_response" || m.Response.RequestID != id {
			continue // only the answer, or an interrupt, moves this turn on
		}
		if m.Response.Response.Behavior == "allow" {
			if err := c.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user",
				"content": []map[string]any{{"type": "tool_result", "tool_use_id": tool, "content": "ran: " + cmd}}}}); err != nil {
				return err
			}
			return c.result("ran: "+cmd, "completed")
		}
		if err := c.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user",
			"content": []map[string]any{{"type": "tool_result", "tool_use_id": tool, "is_error": true,
				"content": "denied: " + m.Response.Response.Message}}}}); err != nil {
			return err
		}
		c.denied = func() error { c.turns++; return c.approval(name, input, what) }
		c.keepDenied(deniedRequest{Name: name, Input: input, What: what})
		return c.result("denied: "+cmd, "completed")
	}
}

// deniedFile keeps the last denied request in the working directory, as
// a real agent's conversation state outlives its process: a session's
// next run (after a pause) retries it when told to.
const deniedFile = ".fake-agent-denied.json"

type deniedRequest struct {
	Codex bool              `json:"codex,omitempty"`
	Name  string            `json:"name,omitempty"`
	Input map[string]string `json:"input,omitempty"`
	What  string            `json:"what"`
}

func (c *chat) keepDenied(d deniedRequest) {
	b, _ := json.Marshal(d)
	_ = os.WriteFile(deniedFile, b, 0o600) // a chat in a read-only place just retries nothing later
}

// deniedBefore is the retry of the request an earlier process of the
// conversation was denied, if any.
func (c *chat) deniedBefore() func() error {
	b, err := os.ReadFile(deniedFile)
	var d deniedRequest
	if err != nil || json.Unmarshal(b, &d) != nil {
		return nil
	}
	if d.Codex {
		return func() error { return c.codexApproval(d.What) }
	}
	return func() error { return c.approval(d.Name, d.Input, d.What) }
}

// codexApproval asks to run cmd as Codex app-server does, and acts on the
// answer.
func (c *chat) codexApproval(cmd string) error {
	id := c.turns
	if err := c.emit(map[string]any{"method": "item/commandExecution/requestApproval", "id": id, "params": map[string]any{
		"threadId": "fake-thread", "turnId": fmt.Sprintf("turn-%d", id), "itemId": fmt.Sprintf("exec-%d", id),
		"command": cmd, "cwd": "/workspace"}}); err != nil {
		return err
	}
	for {
		line, ok, err := c.next()
		if err != nil {
			return err
		}
		if !ok {
			return c.result("stdin ended while waiting for approval", "aborted_tools")
		}
		m, _ := parseChat(line)
		if m.Type != "jsonrpc_response" || string(m.ID) != fmt.Sprint(id) {
			continue
		}
		if strings.HasPrefix(m.Result.Decision, "accept") {
			return c.result("ran: "+cmd, "completed")
		}
		c.denied = func() error { c.turns++; return c.codexApproval(cmd) }
		c.keepDenied(deniedRequest{Codex: true, What: cmd})
		return c.result("declined: "+cmd, "completed")
	}
}

// isInterrupt reports whether m is an interrupt line.
func isInterrupt(m chatMessage) bool {
	return m.Type == "control_request" && strings.Contains(string(m.Request), `"interrupt"`)
}

// withdraw ends a turn waiting on permission prompt id for the interrupt
// request interrupt, as Claude Code does.
func (c *chat) withdraw(id, interrupt string) error {
	for _, v := range []map[string]any{
		{"type": "control_cancel_request", "request_id": id},
		{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": interrupt}},
		{"type": "user", "message": map[string]any{"role": "user",
			"content": []map[string]string{{"type": "text", "text": "[Request interrupted by user for tool use]"}}}},
	} {
		if err := c.emit(v); err != nil {
			return err
		}
	}
	return c.result("interrupted", "aborted_tools")
}

// slow writes progress until interrupted, or for a minute.
func (c *chat) slow() error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	end := time.After(time.Minute)
	for i := 1; ; i++ {
		select {
		case <-t.C:
			if err := c.emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "progress", "step": i}}); err != nil {
				return err
			}
		case <-end:
			return c.result("slow turn done", "completed")
		case <-c.interrupts:
			return c.result("interrupted by a signal", "aborted_streaming")
		case line, ok := <-c.lines:
			if !ok {
				return c.result("stdin ended", "aborted_streaming")
			}
			if m, _ := parseChat(line); isInterrupt(m) {
				if err := c.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m.RequestID}}); err != nil {
					return err
				}
				return c.result("interrupted", "aborted_streaming")
			}
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
}
