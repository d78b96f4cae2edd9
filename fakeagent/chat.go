package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
}

// parseChat reads a stdin line: a stream-json message, or plain text as a
// user message.
func parseChat(line []byte) (m chatMessage, text string) {
	if err := json.Unmarshal(line, &m); err != nil || m.Type == "" {
		return chatMessage{Type: "user"}, string(line)
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
		return c.approval(strings.TrimPrefix(text, "approve: "))
	case text == "slow":
		return c.slow()
	}
	if err := c.say("echo: " + text); err != nil {
		return err
	}
	return c.result("echo: "+text, "completed")
}

// approval asks to run cmd and acts on the answer.
func (c *chat) approval(cmd string) error {
	id := fmt.Sprintf("req-%d", c.turns)
	tool := fmt.Sprintf("toolu_%d", c.turns)
	if err := c.emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]string{"command": cmd}, "tool_use_id": tool}}); err != nil {
		return err
	}
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
		return c.result("denied: "+cmd, "completed")
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
