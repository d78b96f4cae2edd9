package publisher

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// PublishTool publishes the journal's tool record rec, whose line ends at
// byte offset end, as the run's tool message (protocol.ToolMessage, JSON,
// without the nonce) with Baton-Offset end and Baton-Tool-Call. Its
// Msg-Id is the line's. An answer too long for one message is cut, and
// marked truncated. It is retried like PublishLine.
func (c *Chain) PublishTool(ctx context.Context, rec journal.ToolRecord, end int64) error {
	m := protocol.ToolMessage{Call: rec.Call, Phase: rec.Phase, Name: rec.Name, Error: rec.Error}
	if rec.Phase == journal.ToolCall {
		m.Args = json.RawMessage(rec.Args)
	} else if rec.Error == "" {
		s := string(rec.Result)
		m.Result = &s
	}
	b, err := json.Marshal(m)
	for err == nil && len(b) > c.chunkSize && m.Result != nil && len(*m.Result) > 0 {
		// Escapes may make the JSON longer than the answer: halve until it fits.
		cut := (*m.Result)[:len(*m.Result)/2]
		m.Result, m.Truncated = &cut, true
		b, err = json.Marshal(m)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	h := c.header(strconv.FormatInt(end, 10))
	h.Set(protocol.HeaderToolCall, strconv.FormatUint(rec.Call, 10))
	return c.publish(ctx, c.names.IngestSubject(c.runID, protocol.KindTool), b, c.lineID(end), h)
}
