package runspec

import (
	"slices"
	"time"
)

// Tools are the host tools a run's agent may call through `baton mcp`,
// and the bounds runner-outer holds each call to.
type Tools struct {
	// Names are the tools listed to the agent; a call of any other is
	// refused inside the runner.
	Names []string `json:"names"`
	// MaxCalls bounds the run's calls; MaxBytes a call's arguments and
	// its answer; Timeout the wait for one answer.
	MaxCalls int           `json:"maxCalls"`
	MaxBytes int           `json:"maxBytes"`
	Timeout  time.Duration `json:"timeout"`
}

// Has reports whether name is one of t's tools.
func (t *Tools) Has(name string) bool {
	return t != nil && slices.Contains(t.Names, name)
}
