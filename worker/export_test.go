package worker

import "github.com/batonhq/baton/internal/clock"

// RaceEnabled lets the external tests size their work: under the race
// detector, gzip and tar run several times slower.
const RaceEnabled = raceEnabled

// WithBeforeMark runs f before a start marks its run spawning.
func WithBeforeMark(f func(runID string)) Option {
	return func(w *Worker) error { w.testBeforeMark = f; return nil }
}

// WithClock has the worker's background services read and sleep on c.
func WithClock(c clock.Clock) Option { return func(w *Worker) error { w.clock = c; return nil } }
