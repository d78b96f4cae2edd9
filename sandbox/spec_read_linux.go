package sandbox

import (
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// ReadSpec returns the spec of the run in dir, as the worker wrote it: root's
// (0600 in a 0700 run directory), so what it says of the run (the seed
// files, what to capture at the end) is not the agent's to change.
func ReadSpec(dir journal.Dir) (Spec, error) { return chain.ReadSpec(dir.Spec()) }
