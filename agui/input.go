package agui

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/batonhq/baton/protocol"
)

// input projects an input message, what was written to the agent's
// stdin: an interrupt is CUSTOM baton.interrupt; a user's turn is a text
// message with role user, which AG-UI clients show in the conversation
// (a CUSTOM one would be invisible to them); an approval's answer is
// CUSTOM baton.approval_answer; any other input (a handshake, a control
// line) CUSTOM baton.input; the end of input CUSTOM baton.eof.
func (p *Projector) input(m Message, data []byte) {
	seq, _ := strconv.ParseUint(header(m, protocol.HeaderInputSeq), 10, 64)
	var d *decision
	switch header(m, protocol.HeaderInputKind) {
	case protocol.InputKindInterrupt:
		p.st.Interrupted = true
		p.custom("baton.interrupt", inputValue{InputSeq: seq})
		return
	case protocol.InputKindFollowUp:
		p.followUp(bytes.TrimSuffix(data, []byte("\n")), seq)
		return
	case protocol.InputKindDecision:
		d = p.decision()
	}
	if line := bytes.TrimSuffix(data, []byte("\n")); len(line) > 0 {
		p.echo(line, seq, d)
	}
	if d != nil && d.DecidedBy != protocol.DecidedByTimeout {
		// Answered; a hold leaves the prompt open for a person.
		p.resolve(d.ApprovalID)
	}
	if header(m, protocol.HeaderInputEOF) == "true" {
		p.custom("baton.eof", inputValue{InputSeq: seq})
	}
}

// jobEcho echoes the job's input: one input per line when every line is
// JSON (stream-json, JSON-RPC), else one text.
func (p *Projector) jobEcho(input []byte) {
	input = bytes.TrimSuffix(input, []byte("\n"))
	lines := bytes.Split(input, []byte("\n"))
	for _, l := range lines {
		if !json.Valid(l) {
			p.echo(input, 0, nil)
			return
		}
	}
	for _, l := range lines {
		p.echo(l, 0, nil)
	}
}

type inputValue struct {
	InputSeq uint64          `json:"inputSeq,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// echo projects one input, whatever the dialect: every dialect's input
// has its own shape. d, for a decision input, says whose decision it is.
func (p *Projector) echo(line []byte, seq uint64, d *decision) {
	if !json.Valid(line) {
		p.userText(string(line))
		return
	}
	var in struct {
		Type    string `json:"type"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		Method string `json:"method"`
		Params struct {
			Input []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"input"`
		} `json:"params"`
		ID       json.RawMessage                    `json:"id"`
		Result   struct{ Decision json.RawMessage } `json:"result"`
		Response struct {
			RequestID string `json:"request_id"`
			Response  struct {
				Behavior string `json:"behavior"`
				Message  string `json:"message"`
			} `json:"response"`
		} `json:"response"`
	}
	if json.Unmarshal(line, &in) == nil {
		switch {
		case in.Type == "user":
			// Claude Code's stream-json user message.
			if text := blockText(in.Message.Content); text != "" {
				p.userText(text)
				return
			}
		case in.Method == "turn/start" || in.Method == "turn/steer":
			// Codex app-server's turn.
			var texts []string
			for _, i := range in.Params.Input {
				if i.Type == "text" {
					texts = append(texts, i.Text)
				}
			}
			if text := strings.Join(texts, "\n"); text != "" {
				p.userText(text)
				return
			}
		case in.Type == "control_response" && in.Response.Response.Behavior != "":
			p.custom("baton.approval_answer", answer{InputSeq: seq, RequestID: mustJSON(in.Response.RequestID),
				Decision: in.Response.Response.Behavior, Message: in.Response.Response.Message}.by(d))
			return
		case in.Method == "" && in.ID != nil && in.Result.Decision != nil:
			// Codex app-server's answer to a requestApproval.
			var decision string
			if json.Unmarshal(in.Result.Decision, &decision) != nil {
				decision = string(compact(in.Result.Decision))
			}
			p.custom("baton.approval_answer", answer{InputSeq: seq, RequestID: compact(in.ID), Decision: decision}.by(d))
			return
		}
	}
	p.custom("baton.input", inputValue{InputSeq: seq, Input: compact(line)})
}

// answer is a CUSTOM baton.approval_answer's value; baton's own
// decisions (a decision input) say which approval, who decided (the
// policy, a person, or the timeout that held it) and the policy's rule.
type answer struct {
	InputSeq   uint64          `json:"inputSeq,omitempty"`
	RequestID  json.RawMessage `json:"requestId"`
	Decision   string          `json:"decision"`
	Message    string          `json:"message,omitempty"`
	ApprovalID string          `json:"approvalId,omitempty"`
	DecidedBy  string          `json:"decidedBy,omitempty"`
	Rule       string          `json:"rule,omitempty"`
}

func (a answer) by(d *decision) answer {
	if d != nil {
		a.ApprovalID, a.DecidedBy, a.Rule = d.ApprovalID, d.DecidedBy, d.Rule
	}
	return a
}

// userText emits text as a user's message.
func (p *Projector) userText(text string) {
	id := p.newID()
	p.emit(Event{Type: TextMessageStart, MessageID: id, Role: "user"})
	p.emit(Event{Type: TextMessageContent, MessageID: id, Delta: text})
	p.emit(Event{Type: TextMessageEnd, MessageID: id})
}

// blockText is the text of Anthropic message content: a string, or the
// text blocks of an array, joined by newlines.
func blockText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &blocks)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
