// Package secrettls gives the egress proxy the TLS it terminates a run's
// secrets' hosts with (package sandbox/internal/tlsterm). A binary that
// imports it can serve runs with secrets: baton does, and a worker starts
// such runs from baton; baton-runner does not, so the two runner
// processes every other run keeps link no crypto/tls.
package secrettls

import (
	"github.com/batonhq/baton/sandbox/internal/egress"
	"github.com/batonhq/baton/sandbox/internal/tlsterm"
)

func init() { egress.SetTLS(tlsterm.NewCA, tlsterm.ParseCA, tlsterm.Upstream, tlsterm.Server) }
