package egress

import (
	"context"
	"net/netip"

	"github.com/batonhq/baton/sandbox/internal/tlsterm"
)

// The tests intercept as the baton binary does (package sandbox/secrettls).
func init() { SetTLS(tlsterm.NewCA, tlsterm.ParseCA, tlsterm.Upstream, tlsterm.Server) }

// Knobs only tests turn.

// WithLocalAddrs sets how the host's own addresses are found (default: its
// interfaces' addresses).
func WithLocalAddrs(f func() ([]netip.Addr, error)) Option {
	return func(p *Policy) { p.local = f }
}

// WithResolver sets how names resolve (default: the host's resolver).
func WithResolver(f func(ctx context.Context, host string) ([]netip.Addr, error)) Option {
	return func(p *Policy) { p.resolve = f }
}
