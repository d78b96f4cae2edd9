package publisher

import (
	"context"
	"fmt"
	"strconv"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// PublishInput publishes the journal's input record rec, whose line ends
// at byte offset end, as the run's input message: rec.Data on the input
// subject with Baton-Offset end (so a successor aligns from it as from a
// line), Baton-Input-Seq and, on the last input, Baton-Input-EOF. Its
// Msg-Id is the line's, "<runId>:<end>". It is retried like PublishLine.
func (c *Chain) PublishInput(ctx context.Context, rec journal.InputRecord, end int64) error {
	if len(rec.Data) > c.chunkSize {
		return fmt.Errorf("publisher: run %s: input %d of %d bytes is over the chain's max payload %d", c.runID, rec.Seq, len(rec.Data), c.chunkSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	off := strconv.FormatInt(end, 10)
	h := c.header(off)
	h.Set(protocol.HeaderInputSeq, strconv.FormatUint(rec.Seq, 10))
	if rec.EOF {
		h.Set(protocol.HeaderInputEOF, "true")
	}
	if rec.Interrupt {
		h.Set(protocol.HeaderInputKind, protocol.InputKindInterrupt)
	}
	for _, k := range protocol.DecisionHeaders {
		if v := rec.Headers[k]; v != "" {
			h.Set(k, v)
		}
	}
	_, err := c.publish(ctx, c.names.IngestSubject(c.runID, protocol.KindInput), rec.Data, c.lineID(end), h)
	return err
}
