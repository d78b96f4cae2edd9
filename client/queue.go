package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// QueueOption configures Queue.
type QueueOption func(*protocol.QueueRequest)

// WithQueueKey keeps one concurrency key's queue (its jobs waiting and
// running) in the view.
func WithQueueKey(key string) QueueOption {
	return func(r *protocol.QueueRequest) { r.Key = key }
}

// WithQueueLimit lists at most n waiting jobs of each key (the workers
// list protocol.DefaultQueueJobs when it is not given, and at most
// protocol.MaxQueueJobs); the view's Waiting counts them all.
func WithQueueLimit(n int) QueueOption {
	return func(r *protocol.QueueRequest) { r.Limit = n }
}

// Queue asks the workers for the queue of the concurrency keys
// (protocol.ReadQueueSubject): for each key with jobs waiting or
// running, its running jobs against its limit, its weight, and its first
// waiting jobs in the order they will start, each with why it waits
// (protocol.WaitReason). One worker answers. A key that cannot be one
// (protocol.ValidConcurrencyKey) or a limit out of 0 to
// protocol.MaxQueueJobs is refused before anything is sent; a request the
// worker refuses is an error with its code and sentence; no worker
// answering within DefaultCancelTimeout (or ctx), ErrNoWorker.
func (c *Client) Queue(ctx context.Context, opts ...QueueOption) (protocol.QueueView, error) {
	var req protocol.QueueRequest
	for _, o := range opts {
		o(&req)
	}
	if req.Key != "" && !protocol.ValidConcurrencyKey(req.Key) {
		return protocol.QueueView{}, fmt.Errorf("%w: key %q must match [A-Za-z0-9_-]{1,64}", ErrInvalidOption, req.Key)
	}
	if req.Limit < 0 || req.Limit > protocol.MaxQueueJobs {
		return protocol.QueueView{}, fmt.Errorf("%w: queue limit %d, want 0 (the workers' default) to %d", ErrInvalidOption, req.Limit, protocol.MaxQueueJobs)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return protocol.QueueView{}, err
	}
	m := nats.NewMsg(c.names.ReadQueueSubject())
	m.Data = body
	const what = "read the queue"
	msg, err := c.request(ctx, m, what)
	if err != nil {
		return protocol.QueueView{}, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return protocol.QueueView{}, fmt.Errorf("%s: refused (%s): %s", what, code, msg.Header.Get(micro.ErrorHeader))
	}
	var v protocol.QueueView
	if err := json.Unmarshal(msg.Data, &v); err != nil {
		return protocol.QueueView{}, fmt.Errorf("%s: unreadable answer %q: %w", what, msg.Data, err)
	}
	if v.Keys == nil {
		v.Keys = []protocol.KeyQueue{}
	}
	for i := range v.Keys {
		if v.Keys[i].Jobs == nil {
			v.Keys[i].Jobs = []protocol.QueuedJob{}
		}
	}
	return v, nil
}
