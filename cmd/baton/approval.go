package main

import (
	"encoding/json"
	"strings"
	"sync"
)

// approval is a permission prompt an agent printed and waits on: Claude
// Code's control_request can_use_tool, or a Codex app-server
// */requestApproval request.
type approval struct {
	id    json.RawMessage // the request's id, as the answer must carry it
	codex bool
	tool  string          // "Bash", or Codex's item kind
	what  string          // Codex's command or reason (Claude's is in input)
	input json.RawMessage // Claude's tool input: an allow runs it as asked
}

// parseApproval reads a permission prompt from an agent's line.
func parseApproval(line []byte) (approval, bool) {
	var m struct {
		Type      string          `json:"type"`
		RequestID json.RawMessage `json:"request_id"`
		Request   *struct {
			Subtype  string          `json:"subtype"`
			ToolName string          `json:"tool_name"`
			Input    json.RawMessage `json:"input"`
		} `json:"request"`
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params *struct {
			Command string `json:"command"`
			Reason  string `json:"reason"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return approval{}, false
	}
	switch {
	case m.Type == "control_request" && m.Request != nil && m.Request.Subtype == "can_use_tool" && len(m.RequestID) > 0:
		return approval{id: m.RequestID, tool: m.Request.ToolName, input: m.Request.Input}, true
	case strings.HasSuffix(m.Method, "/requestApproval") && len(m.ID) > 0:
		a := approval{id: m.ID, codex: true, tool: strings.TrimSuffix(strings.TrimPrefix(m.Method, "item/"), "/requestApproval")}
		if m.Params != nil {
			a.what = m.Params.Command
			if a.what == "" {
				a.what = m.Params.Reason
			}
		}
		return a, true
	}
	return approval{}, false
}

// parseSettled reads a line by which an agent stops waiting on a permission
// prompt without an answer of this run's input (Claude Code's
// control_cancel_request: an interrupt withdrew it), or says that a prompt
// was settled (Codex's serverRequest/resolved, after its answer or an
// interrupt): the prompt's id, and whether it was withdrawn.
func parseSettled(line []byte) (id json.RawMessage, withdrawn, ok bool) {
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

// answer is the input line that allows or denies a; why is a denial's
// message for the agent.
func (a approval) answer(allow bool, why string) []byte {
	if a.codex {
		decision := "decline"
		if allow {
			decision = "accept"
		}
		b, _ := json.Marshal(map[string]any{"id": a.id, "result": map[string]string{"decision": decision}})
		return b
	}
	resp := map[string]any{"behavior": "deny", "message": why}
	if allow {
		input := a.input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		resp = map[string]any{"behavior": "allow", "updatedInput": input}
	}
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": a.id, "response": resp}})
	return b
}

// answered reads an input line that answers a permission prompt: the
// request's id and whether it allows.
func answered(line []byte) (id json.RawMessage, allow bool, why string, ok bool) {
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

// prompts holds the permission prompts of a run that no input has answered
// yet, oldest first: attach answers the oldest with a y or an n.
type prompts struct {
	mu      sync.Mutex
	pending []approval
}

func (p *prompts) add(a approval) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, a)
}

// resolve drops the prompt an answer with id settles.
func (p *prompts) resolve(id json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range p.pending {
		if string(a.id) == string(id) {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return
		}
	}
}

// oldest is the prompt a y or an n answers.
func (p *prompts) oldest() (approval, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		return approval{}, false
	}
	return p.pending[0], true
}

// reply is the input line attach sends for a typed line: the answer to the
// oldest prompt for "y"/"yes"/"allow" and "n"/"no"/"deny [why]" while one
// waits, else nil (the line goes as it is).
func (p *prompts) reply(typed string) []byte {
	a, ok := p.oldest()
	if !ok {
		return nil
	}
	word, why, _ := strings.Cut(strings.TrimSpace(typed), " ")
	switch strings.ToLower(word) {
	case "y", "yes", "allow":
		return a.answer(true, "")
	case "n", "no", "deny":
		if why = strings.TrimSpace(why); why == "" {
			why = "denied by the user"
		}
		return a.answer(false, why)
	}
	return nil
}

// idText is a request id for a person: a string without its quotes.
func idText(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return sanitize([]byte(s), false)
	}
	return sanitize(id, false)
}
