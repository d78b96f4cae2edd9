package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// isTurnEnd reports whether l is a line that ends the agent's turn, by the
// profile's turnEnd: a JSON object whose field is the string equals.
func (r *run) isTurnEnd(l journal.Line) bool {
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
// it waits longer than its idleTimeout. The returned func ends it. The
// idle clock starts with the holder: a successor counts from the next
// turn end it publishes.
func (w *Worker) trackTurns(r *run) (stop func()) {
	if r.rec.TurnEndField == "" {
		return func() {}
	}
	var (
		mu      sync.Mutex
		waiting bool
		idle    *time.Timer
	)
	r.onTurn = func(ctx context.Context, wait bool) error {
		mu.Lock()
		defer mu.Unlock()
		if wait == waiting {
			return nil
		}
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
		if wait && r.rec.IdleTimeout > 0 {
			idle = time.AfterFunc(r.rec.IdleTimeout, func() {
				r.log.Info().Dur("idle_timeout", r.rec.IdleTimeout).Msg("agent waited for input past its idle timeout; stopping it")
				if err := sandbox.StopIdle(r.dir); err != nil && !errors.Is(err, sandbox.ErrNotRunning) {
					r.log.Warn().Err(err).Msg("stop idle run")
				}
			})
		}
		return nil
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if idle != nil {
			idle.Stop()
		}
	}
}
