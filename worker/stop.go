package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sandbox"
)

// A stop (a cancel, an idle stop, the end of a lost run's agent) is asked
// of the runner until the runner is gone. A runner that took the signal
// ends the agent within its kill grace; one that could not take it yet (it
// is starting, or /proc/locks did not list it) must be asked again soon,
// not at the next check of the record, minutes away.
type stopBounds struct {
	// pauseMin is the first pause after a signal, taken or not; the
	// pauses double up to pauseMax.
	pauseMin time.Duration
	// pauseMax is the longest pause, and how long a runner that took the
	// signal is watched before it is asked again (it ignores a stop asked
	// twice, and each ask reads /proc/locks, whose size is every lock's).
	pauseMax time.Duration
	// within bounds the whole pursuit.
	within time.Duration
}

// stopPursuit is every stop's: the pursuit lasts twelve default kill
// graces.
var stopPursuit = stopBounds{pauseMin: 50 * time.Millisecond, pauseMax: 2 * time.Second, within: 12 * sandbox.DefaultKillGrace}

// errStopAbandoned: the runner was still alive when the pursuit's bound
// passed.
var errStopAbandoned = errors.New("the runner is still alive")

// pursueStop calls signal (sandbox.Cancel, sandbox.StopIdle) on dir until
// the runner holding it is gone, and returns nil then, with how many
// signals the runner took. After a signal taken it watches the runner's
// end with alive (sandbox.Alive: a try-lock, cheap) and asks again every
// b.pauseMax. It returns ctx's error if ctx ends first, and
// errStopAbandoned, with the last failure, once b.within has passed.
func pursueStop(ctx context.Context, dir journal.Dir, signal func(journal.Dir) error, alive func(journal.Dir) (bool, error), b stopBounds) (int, error) {
	deadline := time.Now().Add(b.within)
	pause := b.pauseMin
	sent := 0
	var signalled time.Time // the last signal taken; zero: ask now
	var last error
	for {
		if signalled.IsZero() || time.Since(signalled) >= b.pauseMax {
			switch err := signal(dir); {
			case errors.Is(err, sandbox.ErrNotRunning):
				return sent, nil
			case err == nil:
				sent++
				signalled, pause = time.Now(), b.pauseMin
			default:
				last, signalled = err, time.Time{}
				pause = min(2*pause, b.pauseMax)
			}
		} else {
			switch up, err := alive(dir); {
			case err != nil:
				last = err
			case !up:
				return sent, nil
			}
			pause = min(2*pause, b.pauseMax)
		}
		if time.Now().Add(pause).After(deadline) {
			if last == nil {
				last = errors.New("none, it took every signal")
			}
			return sent, fmt.Errorf("%w %v after %d signals taken (last failure: %v)", errStopAbandoned, b.within, sent, last)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return sent, ctx.Err()
		case <-t.C:
		}
	}
}

// stopLostAgent ends the agent of a run declared lost while its runner
// lived on this node (its worker restarted too slowly, the node was cut
// off or overloaded past the reaper's grace): the run ended `lost` and was
// retried elsewhere, so nobody will publish this agent again (the chain's
// fence refuses its old holder) and it must not go on working. It says so
// in the log, the metric baton_lost_agents_stopped_total and a note in the
// run's directory, then marks the run finished. One pursuit per run; a
// later scan asks again if it gave up or the worker stopped.
func (w *Worker) stopLostAgent(ctx context.Context, dir journal.Dir, rec kv.RunRecord) {
	log := w.log.With().Str("run_id", rec.RunID).Logger()
	alive, err := sandbox.Alive(dir)
	if err != nil {
		log.Warn().Err(err).Msg("is the agent of a run declared lost still running")
		return
	}
	if !alive {
		w.markFinished(rec.RunID)
		return
	}
	w.mu.Lock()
	if w.stoppingLost[rec.RunID] {
		w.mu.Unlock()
		return
	}
	w.stoppingLost[rec.RunID] = true
	w.mu.Unlock()
	log.Warn().Str("reason", rec.Reason).Msg("the run was declared lost while its agent ran on this node; stopping the agent")
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.stoppingLost, rec.RunID)
			w.mu.Unlock()
		}()
		began := time.Now()
		sent, err := pursueStop(ctx, dir, sandbox.Cancel, sandbox.Alive, stopPursuit)
		switch {
		case errors.Is(err, errStopAbandoned):
			w.metrics.stopsAbandoned.WithLabelValues("lost").Inc()
			log.Error().Err(err).Int("signals", sent).Msg("gave up stopping the agent of a run declared lost; the next scan asks again")
			return
		case err != nil:
			return // the worker stops; the next one's scan finds it
		}
		note := fmt.Sprintf("%s: the agent of this run was stopped by worker %s of node %s, %v after it was found running: the run had been declared lost (%s)\n",
			time.Now().UTC().Format(time.RFC3339Nano), w.id, w.node, time.Since(began).Round(time.Millisecond), rec.Reason)
		if err := writeNote(dir, journal.LostStoppedName, note); err != nil {
			log.Warn().Err(err).Msg("write the note of a lost run's stopped agent")
		}
		w.metrics.lostStopped.Inc()
		log.Warn().Int("signals", sent).Dur("took", time.Since(began)).Msg("stopped the agent of a run declared lost while this node was away")
		w.markFinished(rec.RunID)
	}()
}

// writeNote writes a note of the worker's into the run directory, never
// through a link.
func writeNote(dir journal.Dir, name, note string) error {
	f, err := dir.Open(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(note)
	return errors.Join(err, f.Close())
}
