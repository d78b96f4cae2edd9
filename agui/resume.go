package agui

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batonhq/baton/protocol"
)

// ResumeEntry is an answer to one interrupt (@ag-ui/core's ResumeEntry),
// sent in RunAgentInput.resume of the AG-UI run that continues from the
// one the interrupt ended.
type ResumeEntry struct {
	// InterruptID is the interrupt's id: for baton, the approval's.
	InterruptID string `json:"interruptId"`
	// Status is ResumeResolved (answered: Payload is the answer) or
	// ResumeCancelled (abandoned).
	Status   string          `json:"status"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Resume statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)

// ErrBadResume is returned for a resume entry that answers no approval
// interrupt.
var ErrBadResume = errors.New("bad resume entry")

// cancelledMessage is the agent's reason for a denial by a cancelled
// interrupt.
const cancelledMessage = "the person asked cancelled the request"

// RunID is the run the entry's metadata names ({"runId": ...}, as the
// interrupt's metadata has it), or "".
func (e ResumeEntry) RunID() string {
	var meta struct {
		RunID string `json:"runId"`
	}
	if len(e.Metadata) > 0 && json.Unmarshal(e.Metadata, &meta) == nil && protocol.ValidRunID(meta.RunID) {
		return meta.RunID
	}
	return ""
}

// Approval is the approve request (protocol.ApproveRequest) that answers
// an approval interrupt as e does:
//
//   - status resolved, payload {"approved": true|false, "message": "..."}
//     (or a bare true or false): allowed or denied, the message a
//     denial's reason for the agent;
//   - status cancelled: denied.
//
// by names who answers: the entry's metadata {"by": "..."} when it has
// one, else by.
func (e ResumeEntry) Approval(by string) (protocol.ApproveRequest, error) {
	req := protocol.ApproveRequest{ID: e.InterruptID, By: by}
	if e.InterruptID == "" {
		return req, fmt.Errorf("%w: no interruptId", ErrBadResume)
	}
	var meta struct {
		By string `json:"by"`
	}
	if len(e.Metadata) > 0 && json.Unmarshal(e.Metadata, &meta) == nil && meta.By != "" {
		req.By = meta.By
	}
	switch e.Status {
	case ResumeCancelled:
		req.Message = cancelledMessage
		return req, nil
	case ResumeResolved:
	default:
		return req, fmt.Errorf("%w %q: status %q (want %s or %s)", ErrBadResume, e.InterruptID, e.Status, ResumeResolved, ResumeCancelled)
	}
	if json.Unmarshal(e.Payload, &req.Allow) == nil {
		return req, nil
	}
	var p struct {
		Approved *bool  `json:"approved"`
		Message  string `json:"message"`
	}
	if json.Unmarshal(e.Payload, &p) != nil || p.Approved == nil {
		return req, fmt.Errorf(`%w %q: a resolved approval's payload is {"approved": true|false, "message": "..."}, got %s`, ErrBadResume, e.InterruptID, e.Payload)
	}
	req.Allow, req.Message = *p.Approved, p.Message
	return req, nil
}
