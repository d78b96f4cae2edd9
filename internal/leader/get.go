package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Timeout bounds a read whose context has no deadline, as JetStream's own
// API calls are bounded by default.
const Timeout = 5 * time.Second

// Get reads one message of stream from its leader
// ($JS.API.STREAM.MSG.GET), through nc: by sequence, or the last of filter
// lastFor. A message not found is jetstream.ErrMsgNotFound; any other
// refusal is the server's *jetstream.APIError.
func Get(ctx context.Context, nc *nats.Conn, stream string, seq uint64, lastFor string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		Seq     uint64 `json:"seq,omitempty"`
		LastFor string `json:"last_by_subj,omitempty"`
	}{seq, lastFor})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		// A stream without a leader (an election after a server was
		// lost) answers nothing, and a core request would wait for ever:
		// a worker's start sat 3.5 min in the publisher's Align so,
		// holding the run's lease, and kv's read from the leader held up
		// the recovery scan (both found by the cluster chaos suite).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	for errors.Is(err, nats.ErrNoResponders) {
		// No JetStream API on the server for now (a cluster's server
		// starting or catching up; seen in the 3-node publisher tests):
		// ask again within the same bound.
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("get from %s: %w (asked until: %w)", stream, err, context.Cause(ctx))
		case <-t.C:
		}
		m, err = nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	}
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("get from %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, fmt.Errorf("get from %s: %w", stream, jetstream.ErrInvalidJetStreamResponse)
	}
	out := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("get from %s: %w", stream, err)
		}
	}
	return out, nil
}
