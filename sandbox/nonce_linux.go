package sandbox

import (
	"fmt"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// ReadNonce returns the nonce of the run in dir, from its spec: the only
// place it is kept. The spec is root's (0600 in a 0700 run directory), so
// neither the agent nor a NATS client can choose the nonce that ends the
// run's journal.
func ReadNonce(dir journal.Dir) (string, error) {
	spec, err := chain.ReadSpec(dir.Spec())
	if err != nil {
		return "", fmt.Errorf("sandbox: nonce of %s: %w", dir, err)
	}
	return spec.Nonce, nil
}
