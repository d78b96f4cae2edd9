// Package policy is a provisional stand-in (replaced by the i29-policy branch).
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
)

type Verdict string

const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

type Policy struct {
	Default Verdict  `json:"default,omitempty" yaml:"default" msgpack:"default,omitempty"`
	Allow   []string `json:"allow,omitempty" yaml:"allow" msgpack:"allow,omitempty"`
	Ask     []string `json:"ask,omitempty" yaml:"ask" msgpack:"ask,omitempty"`
	Deny    []string `json:"deny,omitempty" yaml:"deny" msgpack:"deny,omitempty"`
}

type Request struct {
	Agent    string
	ID       json.RawMessage
	Tool     string
	Target   string
	Input    json.RawMessage
	ThreadID string
}

type Decision struct {
	Verdict Verdict
	Rule    string
}

func match(rule string, r Request) bool {
	tool, pat, has := strings.Cut(rule, "(")
	if tool != r.Tool {
		return false
	}
	if !has {
		return true
	}
	pat = strings.TrimSuffix(pat, ")")
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pat), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString(re, r.Target)
	return ok
}

func (p Policy) Decide(r Request) Decision {
	for _, c := range []struct {
		v     Verdict
		rules []string
	}{{Deny, p.Deny}, {Ask, p.Ask}, {Allow, p.Allow}} {
		for _, rule := range c.rules {
			if match(rule, r) {
				return Decision{c.v, string(c.v) + ": " + rule}
			}
		}
	}
	d := p.Default
	if d == "" {
		d = Ask
	}
	return Decision{d, "default: " + string(d)}
}

func MayBeRequest(line []byte) bool {
	s := string(line)
	return strings.Contains(s, "can_use_tool") || strings.Contains(s, "requestApproval")
}

type Reader struct{}

func (rd *Reader) Observe(line []byte) {}

func (rd *Reader) Request(line []byte) (Request, bool) {
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
			Command  string `json:"command"`
			ThreadID string `json:"threadId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return Request{}, false
	}
	switch {
	case m.Type == "control_request" && m.Request != nil && m.Request.Subtype == "can_use_tool" && len(m.RequestID) > 0:
		var in struct {
			Command  string `json:"command"`
			FilePath string `json:"file_path"`
		}
		_ = json.Unmarshal(m.Request.Input, &in)
		return Request{Agent: "claude", ID: m.RequestID, Tool: m.Request.ToolName, Target: in.Command + in.FilePath, Input: m.Request.Input}, true
	case strings.HasSuffix(m.Method, "/requestApproval") && len(m.ID) > 0 && m.Params != nil:
		return Request{Agent: "codex", ID: m.ID, Tool: "Bash", Target: m.Params.Command, ThreadID: m.Params.ThreadID}, true
	}
	return Request{}, false
}

var plainID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (r Request) ApprovalID() string {
	var s string
	if json.Unmarshal(r.ID, &s) != nil {
		s = string(r.ID)
	}
	if plainID.MatchString(s) {
		return s
	}
	h := sha256.Sum256(r.ID)
	return "h" + hex.EncodeToString(h[:])[:16]
}

func (r Request) Answer(allow bool, message string) []byte {
	if r.Agent == "codex" {
		d := "decline"
		if allow {
			d = "accept"
		}
		b, _ := json.Marshal(map[string]any{"id": r.ID, "result": map[string]string{"decision": d}})
		return b
	}
	resp := map[string]any{"behavior": "deny", "message": message}
	if allow {
		in := r.Input
		if len(in) == 0 {
			in = json.RawMessage(`{}`)
		}
		resp = map[string]any{"behavior": "allow", "updatedInput": in}
	}
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": r.ID, "response": resp}})
	return b
}

func (r Request) FollowUp(text string) []byte {
	if r.Agent == "codex" {
		b, _ := json.Marshal(map[string]any{"method": "turn/start", "id": "baton-followup-" + r.ApprovalID(),
			"params": map[string]any{"threadId": r.ThreadID, "input": []map[string]string{{"type": "text", "text": text}}}})
		return b
	}
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
	return b
}
