package publisher

import (
	"time"
)

// Knobs only tests turn.

// WithAttemptTimeout bounds one publish attempt (default 2 s); a publish
// whose attempt times out is retried until its context ends, with twice
// the timeout each time (up to 16 s) until the server answers again.
func WithAttemptTimeout(d time.Duration) Option { return func(o *options) { o.attemptTimeout = d } }

// WithMaxPayload sets the largest message body; longer lines are chunked.
// The default is the server's max payload (from the connection) less room
// for headers.
func WithMaxPayload(n int) Option { return func(o *options) { o.maxPayload = n } }

// WithRetryWait sets the first pause before retrying a publish whose
// outcome is unknown; it doubles up to one second.
func WithRetryWait(d time.Duration) Option { return func(o *options) { o.retryWait = d } }

// WithBatchLimits bounds the atomic batches of PublishLines: at most
// messages lines and bytes bytes of line data per batch. messages 1 turns
// batching off.
func WithBatchLimits(messages, bytes int) Option {
	return func(o *options) { o.batchMessages, o.batchBytes = messages, bytes }
}

// WithBeforeFastMessage calls f before the chain sends message i (from 0)
// of a fast batch; false from f drops the message, as a lost connection
// would.
func WithBeforeFastMessage(f func(i int) bool) Option {
	return func(o *options) { o.beforeFast = f }
}
