package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// errCancelTerminal aborts recording a cancel intent on a run that ended.
var errCancelTerminal = errors.New("run already ended")

// cancelTimeout bounds the work of answering one cancel request.
const cancelTimeout = 5 * time.Second

// handleCancel answers a cancel request: it validates the runId, records
// the intent in the run's record by compare-and-set, tells the workers,
// and replies with the record (protocol.CancelReply) or a refusal with one
// of the protocol's cancel error codes. Clients cannot write run records;
// this is the only way their cancel reaches one.
func (w *Worker) handleCancel(ctx context.Context, req micro.Request) {
	runID := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]
	if !protocol.ValidRunID(runID) {
		_ = req.Error(protocol.CancelBadRunID, fmt.Sprintf("runId %q must match [A-Za-z0-9_-]{1,128}", runID), nil)
		return
	}
	life := ctx // the worker's: the notice outlives the request
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	rec, _, err := w.runs.Modify(ctx, runID, func(r *kv.RunRecord) error {
		if r.State.Terminal() {
			return fmt.Errorf("%w: %s is %s", errCancelTerminal, runID, r.State)
		}
		if r.CancelRequested {
			return kv.ErrUnchanged
		}
		r.CancelRequested = true
		return nil
	})
	switch {
	case errors.Is(err, kv.ErrNotFound):
		_ = req.Error(protocol.CancelNotFound, "no run "+runID, nil)
		return
	case errors.Is(err, errCancelTerminal):
		_ = req.Error(protocol.CancelTerminal, err.Error(), nil)
		return
	case err != nil:
		w.log.Warn().Err(err).Str("run_id", runID).Msg("record cancel intent")
		_ = req.Error(protocol.CancelFailed, "cannot record the cancel: "+err.Error(), nil)
		return
	}
	w.log.Info().Str("run_id", runID).Str("run_node", rec.Node).Msg("cancel intent recorded")
	// The holder learns at once (see notice.go).
	w.notify(life, w.names.CancelledSubject(runID))
	b, _ := json.Marshal(protocol.CancelReply{RunID: runID, State: string(rec.State), Node: rec.Node, Worker: rec.Worker})
	_ = req.Respond(b)
}

// cancelNotices stops the runs this worker holds whose record carries a
// cancel intent. It is told of new intents by the workers that record them
// (CancelledNotices), and re-reads the records of the runs it holds
// whenever the connection comes back and every noticeSweep. So its cost
// follows the cancels, never the runs held or the records; a run taken on
// later checks its record in hold.
func (w *Worker) cancelNotices() noticeWatcher {
	return noticeWatcher{
		nc: w.nc, subject: w.names.CancelledNotices(), what: "cancel", log: w.log,
		held: func(runID string) bool { return w.activeRun(runID) != nil },
		onNotice: func(ctx context.Context, runID string) {
			if r := w.activeRun(runID); r != nil {
				w.checkCancel(ctx, r)
			}
		},
		onSweep: w.checkCancels,
		every:   w.noticeSweep(),
		clock:   w.clock,
	}
}

// checkCancels re-reads the record of every run held here.
func (w *Worker) checkCancels(ctx context.Context) {
	w.mu.Lock()
	held := make([]*run, 0, len(w.active))
	for _, r := range w.active {
		held = append(held, r)
	}
	w.mu.Unlock()
	for _, r := range held {
		w.checkCancel(ctx, r)
	}
}

// checkCancel stops r if its record carries a cancel intent.
func (w *Worker) checkCancel(ctx context.Context, r *run) {
	rec, _, err := w.runs.Get(ctx, r.id)
	if err == nil && rec.CancelRequested {
		r.cancel(ctx, w.metrics)
	}
}

func (w *Worker) activeRun(runID string) *run {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active[runID]
}
