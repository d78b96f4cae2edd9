package publisher

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// PublishTool publishes the journal's tool record rec, whose line ends at
// byte offset end, as the run's tool message (protocol.ToolMessage, JSON,
// without the nonce) with Baton-Offset end and Baton-Tool-Call. Its
// Msg-Id is the line's. A message too long for the max payload is cut,
// and marked truncated. It is retried like PublishLine.
func (c *Chain) PublishTool(ctx context.Context, rec journal.ToolRecord, end int64) error {
	m := protocol.ToolMessage{Call: rec.Call, Phase: rec.Phase, Name: rec.Name, Error: rec.Error}
	if rec.Phase == journal.ToolCall {
		m.Args = json.RawMessage(rec.Args)
	} else if rec.Error == "" {
		s := string(rec.Result)
		m.Result = &s
	}
	b, err := json.Marshal(m)
	// Too long for one message (escapes may make the JSON longer than the
	// answer; a server's max payload may be under toolLimits.bytes): halve
	// the answer, then drop the arguments, then halve the error, until it
	// fits. A chain message that never fits would stop the run's chain.
	for err == nil && len(b) > c.chunkSize {
		switch {
		case m.Result != nil && len(*m.Result) > 0:
			cut := (*m.Result)[:len(*m.Result)/2]
			m.Result = &cut
		case m.Args != nil:
			m.Args = nil
		case m.Error != "":
			m.Error = m.Error[:len(m.Error)/2]
		default:
			return fmt.Errorf("publisher: run %s: tool message %d does not fit the chain's max payload %d", c.runID, rec.Call, c.chunkSize)
		}
		m.Truncated = true
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
	_, err = c.publish(ctx, c.names.IngestSubject(c.runID, protocol.KindTool), b, c.lineID(end), h)
	return err
}
