package publisher

import (
	"context"
	"strconv"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// PublishEgress publishes the journal's egress record rec, whose line
// ends at byte offset end, as the run's egress message: rec's Egress as
// JSON on the egress subject, with Baton-Offset end (so a successor aligns
// from it as from a line). Its Msg-Id is the line's, "<runId>:<end>", so
// a retry or a successor's republication is stored once. It is retried
// like PublishLine.
func (c *Chain) PublishEgress(ctx context.Context, rec journal.EgressRecord, end int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return c.fenced
	}
	h := c.header(strconv.FormatInt(end, 10))
	_, err := c.publish(ctx, c.names.IngestSubject(c.runID, protocol.KindEgress), rec.Body(), c.lineID(end), h)
	return err
}
