package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// isTurnEnd reports whether l is a line that ends the agent's turn, by the
// profile's turnEnd: a JSON object whose field is the string equals.
func (r *run) isTurnEnd(l follow.Line) bool {
	field, equals := r.rec.TurnEndField, r.rec.TurnEndEquals
	if field == "" || !bytes.Contains(l.Data, []byte(equals)) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(l.Data, &m) != nil {
		return false
	}
	var v string
	return json.Unmarshal(m[field], &v) == nil && v == equals
}

// turn tells r's turn tracker, if any, that the agent waits (after a
// turn-end line) or runs (after an input).
func (r *run) turn(ctx context.Context, waiting bool) error {
	if r.onTurn == nil {
		return nil
	}
	return r.onTurn(ctx, waiting)
}

// trackTurns makes r publish "waiting" after each turn-end line and
// "running" after the first input that follows, and stop the agent when
// it waits longer than its idleTimeout. A turn that ends once the run's
// end of input is stored is no wait: no input can come, and the agent
// goes on to what it has read, or ends. The returned func ends it.
//
// The run's record keeps when the agent began to wait, written before the
// status: a successor (after a hand-off or a crash) that finds it restates
// "waiting" after its "attached" and lets the idle clock run on from then,
// so a deploy neither restarts an idle run's clock nor stops it.
func (w *Worker) trackTurns(ctx context.Context, r *run) (stop func()) {
	if r.rec.TurnEndField == "" {
		return func() {}
	}
	// An idle stop's pursuit of the runner ends with the tracking.
	ctx, endTracking := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		waiting bool
		idle    *time.Timer
	)
	// startIdle starts the clock of a wait begun waited ago: the idle
	// timeout's, or a session's pause, whichever comes first.
	startIdle := func(waited time.Duration) {
		limit, pause := idleLimit(r.rec)
		if limit <= 0 {
			return
		}
		idle = time.AfterFunc(max(limit-waited, 0), func() { w.idleExpired(ctx, r, limit, pause) })
	}
	r.onTurn = func(ctx context.Context, wait bool) error {
		mu.Lock()
		defer mu.Unlock()
		if wait == waiting || wait && w.inputEnded(ctx, r) {
			return nil
		}
		w.recordWaiting(ctx, r, wait)
		s := protocol.StatusRunning
		if wait {
			s = protocol.StatusWaiting
		}
		if err := r.chain.PublishStatus(ctx, w.status(r, s)); err != nil {
			return err
		}
		waiting = wait
		if idle != nil {
			idle.Stop()
			idle = nil
		}
		if wait {
			startIdle(0)
		}
		w.sessionTurn(ctx, r, wait)
		return nil
	}
	if since := r.rec.WaitingSince; !since.IsZero() {
		// Taken over while the agent waited.
		if err := r.chain.PublishStatus(ctx, w.status(r, protocol.StatusWaiting)); err != nil {
			r.log.Warn().Err(err).Msg("restate waiting")
		}
		waiting = true
		startIdle(time.Since(since))
	}
	return func() {
		endTracking()
		mu.Lock()
		defer mu.Unlock()
		if idle != nil {
			idle.Stop()
		}
	}
}

// idleExpired stops r, whose agent waited for input limit: a session's
// run is paused (checkpointed, then its sandbox ended), any other stopped
// as its idle timeout says.
func (w *Worker) idleExpired(ctx context.Context, r *run, limit time.Duration, pause bool) {
	if pause {
		if !w.requestPause(ctx, r) {
			return
		}
		r.log.Info().Dur("pause_after", limit).Msg("agent waited for input past its session's pauseAfter; checkpointing and ending its sandbox")
	} else {
		r.log.Info().Dur("idle_timeout", limit).Msg("agent waited for input past its idle timeout; stopping it")
	}
	if sent, err := pursueStop(ctx, r.dir, sandbox.StopIdle, sandbox.Alive, stopPursuit); errors.Is(err, errStopAbandoned) {
		w.metrics.stopsAbandoned.WithLabelValues("idle").Inc()
		r.log.Error().Err(err).Int("signals", sent).Msg("gave up stopping the idle run")
	}
}

// recordWaiting writes in r's record since when its agent waits for input
// (now), or that it does not: a successor's idle clock starts from it.
func (w *Worker) recordWaiting(ctx context.Context, r *run, wait bool) {
	since := time.Time{}
	if wait {
		since = time.Now().UTC()
	}
	if _, _, err := w.runs.Modify(ctx, r.id, func(rec *kv.RunRecord) error {
		if rec.State.Terminal() || rec.WaitingSince.Equal(since) {
			return kv.ErrUnchanged
		}
		rec.WaitingSince = since
		return nil
	}); err != nil && !errors.Is(err, kv.ErrUnchanged) {
		// The chain still says it; only a successor's idle clock would
		// start late.
		r.log.Warn().Err(err).Msg("record the turn state")
	}
}

// inputEnded reports whether an end-of-input message is stored for r (the
// last input stored carries the mark, which an interrupt after it carries
// on): the agent's stdin is closed, or is about to be. Any worker may have
// stored it, so the stream is read; when it cannot be, the answer is no.
func (w *Worker) inputEnded(ctx context.Context, r *run) bool {
	ctx, cancel := context.WithTimeout(ctx, inputTimeout)
	defer cancel()
	s, err := w.inputStreamHandle(ctx)
	if err != nil {
		r.log.Debug().Err(err).Msg("look up the input stream")
		return false
	}
	last, err := s.GetLastMsgForSubject(ctx, w.names.InputStoreSubject(r.id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			r.log.Debug().Err(err).Msg("read the run's last input")
		}
		return false
	}
	return last.Header.Get(protocol.HeaderInputEOF) == "true"
}
