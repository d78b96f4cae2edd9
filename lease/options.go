package lease

import (
	"time"

	"github.com/rs/zerolog"
)

// Option configures a Liveness.
type Option func(*options)

type options struct {
	log        zerolog.Logger
	renewEvery time.Duration
}

// WithLogger sets the logger for renewals and losses.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }
