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

var (
	// ErrApprovalConflict means the approval was decided before (by a
	// person or by the policy): nothing was changed. Approve returns the
	// record as it stands with it, when the worker sent it.
	ErrApprovalConflict = errors.New("client: approval decided before")
	// ErrApprovalNotFound means the run has no approval of that id.
	ErrApprovalNotFound = errors.New("client: approval not found")
	// ErrRunEnded means the approval's run ended: nothing waits on the
	// answer. It is also an ErrTerminal.
	ErrRunEnded = fmt.Errorf("%w: nothing waits on the answer", ErrTerminal)
)

// ApproveOption configures Approve.
type ApproveOption func(*protocol.ApproveRequest)

// WithDeny makes Approve deny the request instead of allowing it; message
// is the reason the agent is given ("" lets the worker say it was
// denied).
func WithDeny(message string) ApproveOption {
	return func(r *protocol.ApproveRequest) { r.Allow, r.Message = false, message }
}

// WithDecidedBy names who decides (a user name), kept in the record and
// on the run's chain; the workers write "human" when it is not given.
func WithDecidedBy(name string) ApproveOption {
	return func(r *protocol.ApproveRequest) { r.By = name }
}

// Approve answers approval id of runID (a permission prompt the run's
// policy asked a person about): it allows it, or with WithDeny denies it.
// One worker decides it by compare-and-set on its record, and the run's
// worker writes the answer to the agent, once; it returns the decided
// record. A request decided before is refused with an error wrapping
// ErrApprovalConflict, returned with the record as it stands (who
// decided, and when; zero if it could not be read); an unknown id is
// ErrApprovalNotFound; an ended run's, ErrRunEnded; no worker answering
// within DefaultCancelTimeout (or ctx), ErrNoWorker.
func (c *Client) Approve(ctx context.Context, runID, id string, opts ...ApproveOption) (protocol.Approval, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.Approval{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	if id == "" {
		return protocol.Approval{}, fmt.Errorf("%w: empty approval id", ErrApprovalNotFound)
	}
	req := protocol.ApproveRequest{ID: id, Allow: true}
	for _, o := range opts {
		o(&req)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return protocol.Approval{}, err
	}
	m := nats.NewMsg(c.names.ApproveSubject(runID))
	m.Data = body
	what := "approve " + runID + " " + id
	msg, err := c.request(ctx, m, what)
	if err != nil {
		return protocol.Approval{}, err
	}
	var a protocol.Approval
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		var sentinel error
		switch code {
		case protocol.ApprovalConflict:
			sentinel = ErrApprovalConflict
			// The record as it stands: the refusal's, else read.
			if len(msg.Data) == 0 || json.Unmarshal(msg.Data, &a) != nil || a.ID != id {
				a, _ = c.Approval(ctx, runID, id) // zero when it cannot be read
			}
		case protocol.ApprovalNotFound:
			sentinel = ErrApprovalNotFound
		case protocol.ApprovalGone:
			sentinel = ErrRunEnded
		default:
			return protocol.Approval{}, fmt.Errorf("%s: refused (%s): %s", what, code, desc)
		}
		return a, fmt.Errorf("%w: %s", sentinel, desc)
	}
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return protocol.Approval{}, fmt.Errorf("%s: unreadable answer %q: %w", what, msg.Data, err)
	}
	return a, nil
}

// Approvals lists approval records, oldest ask first: of one run
// (q.RunID) or of every run, only pending ones with q.Pending, at most
// q.Limit (the workers' bound when 0; the reply says Truncated when more
// matched). One worker reads them from the approvals bucket.
func (c *Client) Approvals(ctx context.Context, q protocol.ApprovalsQuery) (protocol.ApprovalsReply, error) {
	if q.RunID != "" && !protocol.ValidRunID(q.RunID) {
		return protocol.ApprovalsReply{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, q.RunID)
	}
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
		return protocol.ApprovalsReply{}, fmt.Errorf("list approvals: unreadable answer %q: %w", msg.Data, err)
	}
	return rep, nil
}

// Approval returns approval id of runID, or an error wrapping
// ErrApprovalNotFound.
func (c *Client) Approval(ctx context.Context, runID, id string) (protocol.Approval, error) {
	rep, err := c.Approvals(ctx, protocol.ApprovalsQuery{RunID: runID})
	if err != nil {
		return protocol.Approval{}, err
	}
	for _, a := range rep.Approvals {
		if a.ID == id {
			return a, nil
		}
	}
	return protocol.Approval{}, fmt.Errorf("%w: run %s has no approval %q", ErrApprovalNotFound, runID, id)
}

// WatchApprovals calls fn with each approval notice the workers publish
// from now on: the record of an approval of runID (of every run when
// runID is "") each time it changes (asked, decided, held, answered). It
// returns when ctx ends (with ctx's error) or with fn's error.
//
// Notices are core NATS: at most once, and none for what changed before
// the subscription. The records are the truth: a caller that must see
// every change lists them (Approvals) after WatchApprovals has begun
// (OnSubscribed), and again after a reconnect.
func (c *Client) WatchApprovals(ctx context.Context, runID string, fn func(protocol.Approval) error, opts ...ApprovalsWatchOption) error {
	subject := c.names.ApprovalNotices()
	if runID != "" {
		if !protocol.ValidRunID(runID) {
			return fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
		}
		subject = c.names.ApprovalNoticeSubject(runID)
	}
	var o approvalsWatchOptions
	for _, opt := range opts {
		opt(&o)
	}
	nc := c.js.Conn()
	ch := make(chan *nats.Msg, liveBuffer)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		return fmt.Errorf("watch approvals: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fctx, cancel := context.WithTimeout(ctx, DefaultReadTimeout)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("watch approvals: subscribe to %s: %w", subject, err)
	}
	if o.subscribed != nil {
		if err := o.subscribed(); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-ch:
			a, ok := c.notice(m)
			if !ok {
				continue
			}
			if err := fn(a); err != nil {
				return err
			}
		}
	}
}

// ApprovalsWatchOption configures WatchApprovals.
type ApprovalsWatchOption func(*approvalsWatchOptions)

type approvalsWatchOptions struct {
	subscribed func() error
}

// OnSubscribed has WatchApprovals call fn once its subscription is in
// place, before the first notice: the moment to list the records, so no
// change is missed between the list and the notices. An error of fn
// ends WatchApprovals with it.
func OnSubscribed(fn func() error) ApprovalsWatchOption {
	return func(o *approvalsWatchOptions) { o.subscribed = fn }
}

// notice decodes an approval notice; ok is false for a message that is
// not the record of the run its subject names.
func (c *Client) notice(m *nats.Msg) (protocol.Approval, bool) {
	var a protocol.Approval
	if json.Unmarshal(m.Data, &a) != nil || a.ID == "" || !protocol.ValidRunID(a.RunID) ||
		m.Subject != c.names.ApprovalNoticeSubject(a.RunID) {
		return protocol.Approval{}, false
	}
	return a, true
}
