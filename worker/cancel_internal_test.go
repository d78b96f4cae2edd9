package worker

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// TestPursueStop: a stop is asked until the runner is gone, whatever the
// runner said before (not signallable yet, took it, failed); a runner that
// took it is watched and asked again only every pauseMax; no longer than
// its bound.
func TestPursueStop(t *testing.T) {
	other := errors.New("signal failed")
	b := stopBounds{pauseMin: time.Millisecond, pauseMax: 8 * time.Millisecond, within: 200 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		signals   []error // what each signal returns; the last repeats
		lives     []bool  // what each watch of a signalled runner says; the last repeats
		want      error
		sent      int // exact; -1: more than one
		calls     int // signals asked, exact; 0: more than 3
		abandoned bool
		// bounds, if set, replaces b: a case whose count depends on the
		// watches coming within pauseMax of the signal gives them room a
		// loaded machine's late timers cannot eat up (at pauseMax 8 ms the
		// three watches, 1+2+4 ms apart, left 1 ms).
		bounds *stopBounds
	}{
		{"gone", []error{sandbox.ErrNotRunning}, []bool{true}, nil, 0, 1, false, nil},
		{"signalled, then gone", []error{nil}, []bool{false}, nil, 1, 1, false,
			&stopBounds{pauseMin: time.Millisecond, pauseMax: 2 * time.Second, within: 10 * time.Second}},
		{"signalled, watched, then gone", []error{nil}, []bool{true, true, false}, nil, 1, 1, false,
			&stopBounds{pauseMin: time.Millisecond, pauseMax: 2 * time.Second, within: 10 * time.Second}},
		{"alive, then signalled, then gone", []error{sandbox.ErrTryAgain, sandbox.ErrTryAgain, nil}, []bool{false}, nil, 1, 3, false, nil},
		{"signalled, lives past pauseMax, asked again, gone", []error{nil, sandbox.ErrNotRunning}, []bool{true}, nil, 1, 2, false, nil},
		{"another failure, then gone", []error{other, sandbox.ErrNotRunning}, []bool{true}, nil, 0, 2, false, nil},
		{"never signallable", []error{sandbox.ErrTryAgain}, []bool{true}, errStopAbandoned, 0, 0, true, nil},
		{"takes every signal and lives on", []error{nil}, []bool{true}, errStopAbandoned, -1, 0, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := b
			if tc.bounds != nil {
				b = *tc.bounds
			}
			calls, watches := 0, 0
			began := time.Now()
			sent, err := pursueStop(context.Background(), journal.Dir(t.TempDir()), func(journal.Dir) error {
				calls++
				return tc.signals[min(calls, len(tc.signals))-1]
			}, func(journal.Dir) (bool, error) {
				watches++
				return tc.lives[min(watches, len(tc.lives))-1], nil
			}, b)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("pursueStop = %v, want %v", err, tc.want)
			}
			if (tc.sent >= 0 && sent != tc.sent) || (tc.sent < 0 && sent < 2) {
				t.Errorf("%d signals taken, want %d", sent, tc.sent)
			}
			if tc.calls > 0 && calls != tc.calls {
				t.Errorf("%d signals asked, want %d", calls, tc.calls)
			}
			if tc.abandoned {
				if calls <= 3 && tc.sent == 0 {
					t.Errorf("gave up after %d calls: not pursued", calls)
				}
				if took := time.Since(began); took < b.within-b.pauseMax || took > b.within+time.Second {
					t.Errorf("gave up after %v, want about %v", took, b.within)
				}
			}
			// A signalled runner is asked again no more often than pauseMax.
			if limit := int(time.Since(began)/b.pauseMax) + 2; sent > limit {
				t.Errorf("%d signals taken in %v: asked more often than every %v", sent, time.Since(began), b.pauseMax)
			}
		})
	}
	t.Run("ends with its context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := pursueStop(ctx, journal.Dir(t.TempDir()), func(journal.Dir) error { return sandbox.ErrTryAgain }, sandbox.Alive, stopPursuit)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("pursueStop = %v, want the context's end", err)
		}
	})
}

// TestCancelPursuedWhileHeld: a cancel the runner cannot take is asked
// again in the background while the run is held, not taken as done, and
// its pursuit ends with the run's hold; one that found the runner gone is
// done.
func TestCancelPursuedWhileHeld(t *testing.T) {
	m := newMetrics(nil, &Worker{})
	r := &run{id: "r", dir: journal.Dir(t.TempDir()), log: zerolog.Nop(), ended: make(chan struct{})}
	// No pid file, no lock: no runner.
	r.cancel(context.Background(), m)
	testenv.WaitFor(t, 5*time.Second, "the cancel of a run with no runner taken as done", func() bool {
		r.cancelMu.Lock()
		defer r.cancelMu.Unlock()
		return r.cancelSent && !r.cancelling
	})

	r2 := &run{id: "r2", dir: journal.Dir(t.TempDir()), log: zerolog.Nop(), ended: make(chan struct{})}
	// A garbled pid file: Cancel fails every time.
	if err := os.WriteFile(r2.dir.PID(), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r2.cancel(context.Background(), m)
	time.Sleep(300 * time.Millisecond) // several failed asks
	r2.cancelMu.Lock()
	sent, pursuing := r2.cancelSent, r2.cancelling
	r2.cancelMu.Unlock()
	if sent || !pursuing {
		t.Fatalf("after failed cancels: sent %v, pursued %v; want not sent, still pursued", sent, pursuing)
	}
	close(r2.ended)
	testenv.WaitFor(t, 5*time.Second, "the pursuit to end with the run's hold", func() bool {
		r2.cancelMu.Lock()
		defer r2.cancelMu.Unlock()
		return !r2.cancelling
	})
	if r2.cancelSent {
		t.Fatal("a cancel that always failed was taken as done")
	}
}
