package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// AGUIOption configures WatchAGUI.
type AGUIOption func(*aguiOptions)

type aguiOptions struct {
	after   agui.Position
	workers func(bool)
}

// AGUIAfter resumes a WatchAGUI after position p (an event's Pos, an SSE
// event's id): the watch then calls fn only for the events that follow
// it, exactly those an uninterrupted watch gave after p.
func AGUIAfter(p agui.Position) AGUIOption { return func(o *aguiOptions) { o.after = p } }

// AGUIOnWorkers is OnWorkers for WatchAGUI.
func AGUIOnWorkers(fn func(answering bool)) AGUIOption {
	return func(o *aguiOptions) { o.workers = fn }
}

// WatchAGUI watches runID's chain as AG-UI events (package agui), calling
// fn for each in order, until the run's terminal status has been
// projected; it returns that status. The projection follows the run's
// record: its profile's events dialect, its session as the threadId, its
// input as the first user message; so it waits for the record as
// AwaitRecord does. Every watch of a run gives the same events, ids and
// positions, so AGUIAfter resumes one exactly. fn's error ends the watch
// and is returned, as Watch does.
func (c *Client) WatchAGUI(ctx context.Context, runID string, fn func(agui.Projected) error, opts ...AGUIOption) (protocol.Status, error) {
	var o aguiOptions
	for _, opt := range opts {
		opt(&o)
	}
	rec, err := c.AwaitRecord(ctx, runID)
	if err != nil {
		return protocol.Status{}, fmt.Errorf("watch %s as AG-UI: %w", runID, err)
	}
	p := NewProjector(rec, agui.After(o.after), agui.WithMaxLine(c.maxLine))
	var wopts []WatchOption
	if o.workers != nil {
		wopts = append(wopts, OnWorkers(o.workers))
	}
	// The projection is a function of the whole chain: a resume replays
	// it from the start and skips what precedes the position.
	return c.Watch(ctx, runID, func(ev Event) error {
		for _, pe := range p.Project(AGUIMessage(ev)) {
			if err := fn(pe); err != nil {
				return err
			}
		}
		return nil
	}, wopts...)
}

// NewProjector returns the AG-UI projector of the run rec describes: its
// profile's dialect, its session as the threadId (else the runId), its
// input as the first user message. opts come after those.
func NewProjector(rec kv.RunRecord, opts ...agui.Option) *agui.Projector {
	base := []agui.Option{agui.WithDialect(agui.Dialect(rec.Events))}
	if rec.Session != "" {
		base = append(base, agui.WithThreadID(rec.Session))
	}
	if rec.Input != "" {
		base = append(base, agui.WithJobInput([]byte(rec.Input)))
	}
	return agui.New(rec.RunID, append(base, opts...)...)
}

// AGUIMessage is ev as a projector reads it. A chunked line is whole in
// ev already; an input's headers, and an approval's, are restored from
// its fields.
func AGUIMessage(ev Event) agui.Message {
	m := agui.Message{Kind: ev.Kind, Seq: ev.Seq, Data: ev.Data}
	set := func(key, v string) {
		if v != "" {
			if m.Header == nil {
				m.Header = map[string][]string{}
			}
			m.Header[key] = []string{v}
		}
	}
	if ev.Kind == protocol.KindInput {
		m.Header = map[string][]string{}
		if ev.EOF {
			set(protocol.HeaderInputEOF, "true")
		}
		kind := ev.InputKind
		if ev.Interrupt {
			kind = protocol.InputKindInterrupt
		}
		set(protocol.HeaderInputKind, kind)
		if ev.InputSeq > 0 {
			set(protocol.HeaderInputSeq, strconv.FormatUint(ev.InputSeq, 10))
		}
	}
	if ev.Approval != "" {
		set(protocol.HeaderApproval, ev.Approval)
		set(protocol.HeaderVerdict, ev.Verdict)
		set(protocol.HeaderRule, ev.Rule)
		set(protocol.HeaderDecidedBy, ev.DecidedBy)
	}
	return m
}
