package consumer

import (
	"time"
)

// Knobs only tests turn.

// WithProfileWait sets how long a job whose profile is at its
// maxConcurrent waits in the stream before it is delivered again (default
// 2s).
func WithProfileWait(d time.Duration) Option { return func(in *Intake) { in.profileWait = d } }

// WithRejectWait sets how long a job whose rejection could not be
// published to the DLQ waits before it is delivered again (default 5s).
func WithRejectWait(d time.Duration) Option { return func(in *Intake) { in.rejectWait = d } }
