package follow

import (
	"fmt"
)

// Knobs only tests turn.

// WithMaxLine sets the longest line (without its '\n') delivered with its
// bytes (default DefaultMaxLine); a longer one comes with nil Data.
func WithMaxLine(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: max line %d", ErrInvalid, n)
		}
		o.maxLine = n
		return nil
	}
}

// WithReadBuffer sets the read buffer's starting size (default
// DefaultReadBuffer). It also bounds how many bytes of lines one call of fn
// can carry.
func WithReadBuffer(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: read buffer %d", ErrInvalid, n)
		}
		o.readBuffer = n
		return nil
	}
}
