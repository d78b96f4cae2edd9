package agui

import (
	"encoding/json"

	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// Approvals. A permission prompt of a run whose profile has a policy is
// published with the approval's id, the policy's verdict and its rule
// (protocol.HeaderApproval, HeaderVerdict, HeaderRule). Its CUSTOM
// baton.approval says them; a prompt the policy asks a person about
// stays open until a decision input answers it (one not by
// protocol.DecidedByTimeout, which only holds it) or a follow-up turn
// says a person allowed it, and a turn that ends while one is open ends
// with RUN_FINISHED's interrupt outcome, one Interrupt per open prompt.

// approval is a CUSTOM baton.approval's value: a permission prompt the
// agent waits on, to be answered on its stdin in its own dialect; with a
// policy, the approval's id, the policy's verdict and the rule.
type approval struct {
	Dialect    Dialect         `json:"dialect"`
	RequestID  json.RawMessage `json:"requestId"`
	ApprovalID string          `json:"approvalId,omitempty"`
	Verdict    string          `json:"verdict,omitempty"`
	Rule       string          `json:"rule,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Request    json.RawMessage `json:"request"`
}

// Verdicts of a policy (protocol.HeaderVerdict).
const (
	verdictAsk = "ask"
)

// prompt emits a permission prompt's CUSTOM baton.approval, with the
// verdict of the run's policy when its message has one, and keeps an ask
// open, naming the tool and target the prompt asks for as the policy
// reads them (package policy: a Codex file change's paths, which only
// the item's earlier line tells, are left out).
func (p *Projector) prompt(a approval, line []byte) {
	a.ApprovalID = p.header(protocol.HeaderApproval)
	a.Verdict = p.header(protocol.HeaderVerdict)
	if a.Verdict != "" {
		a.Rule = p.header(protocol.HeaderRule)
	}
	p.custom("baton.approval", a)
	if a.Verdict != verdictAsk || a.ApprovalID == "" {
		return
	}
	p.resolve(a.ApprovalID)
	var reader policy.Reader
	req, _ := reader.Request(line)
	p.st.Asks = append(p.st.Asks, ask{ID: a.ApprovalID, Tool: req.Tool, Target: req.Target, Rule: a.Rule, Call: a.ToolCallID})
	if len(p.st.Asks) > maxPending {
		p.st.Asks = p.st.Asks[1:]
	}
	if raw := p.st.AskWait; raw != nil {
		// The turn's waiting status came first.
		st, _ := protocol.ParseStatus(raw)
		p.closeRun(st, raw)
	}
}

// resolve closes the ask of approval id, if open.
func (p *Projector) resolve(id string) {
	for i, a := range p.st.Asks {
		if a.ID == id {
			p.st.Asks = append(p.st.Asks[:i], p.st.Asks[i+1:]...)
			return
		}
	}
}

// asked reports whether an open ask is about the AG-UI tool call id.
func (p *Projector) asked(id string) bool {
	for _, a := range p.st.Asks {
		if a.Call == id {
			return true
		}
	}
	return false
}

// approvalSchema is the answer an approval's interrupt expects: the
// payload of a resolved resume entry.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"message":{"type":"string"}},"required":["approved"]}`)

type interruptMeta struct {
	RunID  string `json:"runId"`
	Tool   string `json:"tool,omitempty"`
	Target string `json:"target,omitempty"`
	Rule   string `json:"rule,omitempty"`
}

// interrupts are the open asks as the interrupt outcome's interrupts; an
// ask's tool call is named while it waits for its result.
func (p *Projector) interrupts() []Interrupt {
	out := make([]Interrupt, 0, len(p.st.Asks))
	for _, a := range p.st.Asks {
		in := Interrupt{ID: a.ID, Reason: protocol.ReasonApproval, Message: askMessage(a), ResponseSchema: approvalSchema,
			Metadata: mustJSON(interruptMeta{RunID: p.runID, Tool: a.Tool, Target: a.Target, Rule: a.Rule})}
		if a.Call != "" && p.pendingCall(a.Call) {
			in.ToolCallID = a.Call
		}
		out = append(out, in)
	}
	return out
}

// pendingCall reports whether the AG-UI tool call id waits for its
// result.
func (p *Projector) pendingCall(id string) bool {
	for _, e := range p.st.Pending {
		if e.ID == id {
			return true
		}
	}
	return false
}

// askMessage is an interrupt's prompt for whoever answers.
func askMessage(a ask) string {
	what := a.Tool
	if what == "" {
		what = "the tool"
	}
	if a.Target != "" {
		what += ": " + a.Target
	}
	msg := "Allow " + what + "?"
	if a.Rule != "" {
		msg += " (" + a.Rule + ")"
	}
	return msg
}

// decision reads the approval headers of a decision or follow-up input.
type decision struct {
	ApprovalID string
	DecidedBy  string
	Rule       string
}

func (p *Projector) decision() *decision {
	return &decision{ApprovalID: p.header(protocol.HeaderApproval), DecidedBy: p.header(protocol.HeaderDecidedBy),
		Rule: p.header(protocol.HeaderRule)}
}

// followUp projects the turn baton sends an agent once a person allowed
// a prompt it was told awaits approval: CUSTOM baton.approval_followup,
// the line as it went in.
func (p *Projector) followUp(line []byte, seq uint64) {
	d := p.decision()
	in := compact(mustJSON(string(line)))
	if json.Valid(line) {
		in = compact(line)
	}
	p.custom("baton.approval_followup", followUpValue{InputSeq: seq, ApprovalID: d.ApprovalID, DecidedBy: d.DecidedBy, Input: in})
	p.resolve(d.ApprovalID)
}

type followUpValue struct {
	InputSeq   uint64          `json:"inputSeq,omitempty"`
	ApprovalID string          `json:"approvalId,omitempty"`
	DecidedBy  string          `json:"decidedBy,omitempty"`
	Input      json.RawMessage `json:"input"`
}
