package lease

import (
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
)

// Option configures a Liveness. An option given a value it cannot take
// makes Live fail with an error wrapping ErrInvalidOption.
type Option func(*options) error

// ErrInvalidOption: an option was given a value it cannot take.
var ErrInvalidOption = errors.New("lease: invalid option")

type options struct {
	log       zerolog.Logger
	clock     clock.Clock
	onSession func(id uint64)
}

// WithLogger sets the logger for renewals and losses.
func WithLogger(l zerolog.Logger) Option { return func(o *options) error { o.log = l; return nil } }

// WithOnSession calls f with the id of each session once it is open, the
// first one's before Live returns, from the goroutine that opened it.
func WithOnSession(f func(id uint64)) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: nil session callback", ErrInvalidOption)
		}
		o.onSession = f
		return nil
	}
}

// WithClock sets the clock the liveness renews on and a lease's deadlines
// are read and waited on (default clock.Real): the server's TTLs run on
// its own, so a clock other than the system's is for tests.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		o.clock = c
		return nil
	}
}
