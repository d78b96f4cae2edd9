package worker

import "context"

// RaceEnabled lets the external tests size their work: under the race
// detector, gzip and tar run several times slower.
const RaceEnabled = raceEnabled

// WithBeforeMark runs f before a start marks its run spawning.
func WithBeforeMark(f func(runID string)) Option {
	return func(w *Worker) error { w.testBeforeMark = f; return nil }
}

// WithBeforeSetupCheckpoint runs f before a session's setup is
// checkpointed.
func WithBeforeSetupCheckpoint(f func(ctx context.Context, runID string)) Option {
	return func(w *Worker) error { w.testBeforeSetupCheckpoint = f; return nil }
}

// WithBeforeRecordTerminal runs f between the publish of a run's terminal
// status and the write of its terminal record.
func WithBeforeRecordTerminal(f func(runID string)) Option {
	return func(w *Worker) error { w.testBeforeRecordTerminal = f; return nil }
}
