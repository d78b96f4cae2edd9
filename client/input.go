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
	// ErrNoInput means the run takes no input: its profile has stdin
	// "once".
	ErrNoInput = errors.New("client: run takes no input")
	// ErrTooLarge means an input message is over the workers'
	// maxInputBytes.
	ErrTooLarge = errors.New("client: input too large")
)

// SendOption configures Send.
type SendOption func(*sendOptions)

type sendOptions struct {
	eof   bool
	msgID string
}

// WithEOF closes the agent's stdin once this message (which may be empty)
// is written: the agent reads end of input after everything sent before.
func WithEOF() SendOption { return func(o *sendOptions) { o.eof = true } }

// WithMsgID makes the send idempotent within the input stream's
// duplicates window (two minutes): a retry with the same id after a lost
// answer is not stored twice.
func WithMsgID(id string) SendOption { return func(o *sendOptions) { o.msgID = id } }

// Send sends data to the stdin of runID's agent, whose profile must have
// stdin "stream". A worker checks the run and the message and stores it;
// the run's runner writes it to the agent's stdin once, as one line (a
// newline is added if missing), after every message accepted before it,
// whichever worker holds the run meanwhile. The run's chain then shows it
// as an input message where it went in. It returns the worker's answer;
// an error wrapping ErrNotFound if there is no such run, ErrTerminal if it
// ended or its stdin was closed, ErrNoInput if it takes no input,
// ErrTooLarge if data is over maxInputBytes, or ErrNoWorker if no worker
// answered within DefaultCancelTimeout (or ctx).
func (c *Client) Send(ctx context.Context, runID string, data []byte, opts ...SendOption) (protocol.InputReply, error) {
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !protocol.ValidRunID(runID) {
		return protocol.InputReply{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	m := nats.NewMsg(c.names.InputSubject(runID))
	m.Data = data
	if o.eof {
		m.Header.Set(protocol.HeaderInputEOF, "true")
	}
	if o.msgID != "" {
		m.Header.Set(nats.MsgIdHdr, o.msgID)
	}
	return c.inputRequest(ctx, runID, m, "send to")
}

// StreamJSONUserMessage wraps text as one user message of Claude Code's
// `--input-format stream-json`: the line to send to such an agent.
func StreamJSONUserMessage(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":               "user",
		"message":            map[string]string{"role": "user", "content": text},
		"parent_tool_use_id": nil,
		"session_id":         "default",
	})
	return b
}

// Interrupt asks for runID's agent to stop its current turn, as its
// profile's interrupt says (SIGINT to the agent's process group, or a
// line on its stdin); the run goes on, unlike Cancel. The interrupt is
// stored in order with the run's input and applied once, whichever worker
// holds the run. Errors are Send's.
func (c *Client) Interrupt(ctx context.Context, runID string) (protocol.InputReply, error) {
	if !protocol.ValidRunID(runID) {
		return protocol.InputReply{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	return c.inputRequest(ctx, runID, nats.NewMsg(c.names.InterruptSubject(runID)), "interrupt")
}

// inputRequest sends an input or interrupt request and reads the answer.
func (c *Client) inputRequest(ctx context.Context, runID string, m *nats.Msg, what string) (protocol.InputReply, error) {
	msg, err := c.request(ctx, m, what+" "+runID)
	if err != nil {
		return protocol.InputReply{}, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		var sentinel error
		switch code {
		case protocol.InputNotFound:
			sentinel = ErrNotFound
		case protocol.InputTerminal:
			sentinel = ErrTerminal
		case protocol.InputNotStream:
			sentinel = ErrNoInput
		case protocol.InputTooLarge:
			sentinel = ErrTooLarge
		default:
			return protocol.InputReply{}, fmt.Errorf("%s %s: refused (%s): %s", what, runID, code, desc)
		}
		return protocol.InputReply{}, fmt.Errorf("%w: %s", sentinel, desc)
	}
	var rep protocol.InputReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.InputReply{}, fmt.Errorf("%s %s: unreadable answer %q: %w", what, runID, msg.Data, err)
	}
	return rep, nil
}

// request sends m to the workers, one of which answers, within
// DefaultCancelTimeout (or ctx); what names the request in its errors,
// which wrap ErrNoWorker when nobody answered.
func (c *Client) request(ctx context.Context, m *nats.Msg, what string) (*nats.Msg, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, DefaultCancelTimeout)
	defer cancel()
	msg, err := c.js.Conn().RequestMsgWithContext(ctx, m)
	switch {
	case parent.Err() != nil: // the caller's end, not ours
		return nil, fmt.Errorf("%s: %w", what, parent.Err())
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%s: %w: nobody listens on %s (is a `baton worker` running?)", what, ErrNoWorker, m.Subject)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%s: %w within %v", what, ErrNoWorker, DefaultCancelTimeout)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return msg, nil
}
