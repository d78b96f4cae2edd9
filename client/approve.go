package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// ErrConflict means an approval was answered before (by a person, or by
// the policy): each is answered once.
var ErrConflict = errors.New("client: approval answered before")

// Approve answers approval req.ID of runID (a permission prompt its
// policy asked a person about): allow or deny, with a denial's message
// for the agent and who decides. The run's worker writes the answer to
// the agent once. It returns the decided approval; an error wrapping
// ErrConflict when it was answered before, ErrTerminal when the run
// ended (nothing waits on the answer), ErrNotFound when the run has no
// such approval, or ErrNoWorker.
func (c *Client) Approve(ctx context.Context, runID string, req protocol.ApproveRequest) (protocol.Approval, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.Approval{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return protocol.Approval{}, err
	}
	m := nats.NewMsg(c.names.ApproveSubject(runID))
	m.Data = body
	what := "approve " + req.ID + " of " + runID
	msg, err := c.request(ctx, m, what)
	if err != nil {
		return protocol.Approval{}, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		var sentinel error
		switch code {
		case protocol.ApprovalConflict:
			sentinel = ErrConflict
		case protocol.ApprovalGone:
			sentinel = ErrTerminal
		case protocol.ApprovalNotFound:
			sentinel = ErrNotFound
		default:
			return protocol.Approval{}, fmt.Errorf("%s: refused (%s): %s", what, code, desc)
		}
		return protocol.Approval{}, fmt.Errorf("%w: %s: %s", sentinel, what, desc)
	}
	var a protocol.Approval
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return protocol.Approval{}, fmt.Errorf("%s: unreadable answer %q: %w", what, msg.Data, err)
	}
	return a, nil
}

// Approvals lists approval records as q asks (one run's, or every run's;
// only pending ones with q.Pending), oldest ask first.
func (c *Client) Approvals(ctx context.Context, q protocol.ApprovalsQuery) (protocol.ApprovalsReply, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return protocol.ApprovalsReply{}, err
	}
	m := nats.NewMsg(c.names.ReadApprovalsSubject())
	m.Data = body
	msg, err := c.request(ctx, m, "list approvals")
	if err != nil {
		return protocol.ApprovalsReply{}, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return protocol.ApprovalsReply{}, fmt.Errorf("list approvals: refused (%s): %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	var rep protocol.ApprovalsReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.ApprovalsReply{}, fmt.Errorf("list approvals: unreadable answer: %w", err)
	}
	return rep, nil
}
