package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

var (
	// ErrNotPooled is returned by Take for a spec whose sandbox is not
	// the prestarted one's (another network, mounts, limits, uids, agent
	// binary or HOME, or a run directory elsewhere): the entry is left as
	// it was, and the run starts cold.
	ErrNotPooled = chain.ErrNotPooled
	// ErrPoolEntryGone is returned by Take when the prestarted chain
	// ended before its take (its sandbox failed, or it was killed): the
	// entry is closed, nothing of the run was written, and the run starts
	// cold.
	ErrPoolEntryGone = errors.New("sandbox: the prestarted chain has ended")
)

// PoolEntryPrefix starts the name of a prestarted chain's directory in
// the runs directory. No run id has a dot, so no run's directory is one,
// and scans of run directories pass them by.
const PoolEntryPrefix = ".pool-"

// IsPoolEntry reports whether name (a runs directory's entry) is a
// prestarted chain's directory.
func IsPoolEntry(name string) bool { return strings.HasPrefix(name, PoolEntryPrefix) }

// Poolable reports why a chain for s cannot be started ahead of its job,
// or nil if it can: a network with CIDR entries is set up per run (pasta
// and nft), after the sandbox exists, and a run with secrets trusts a CA
// made for it.
func Poolable(s Spec) error {
	if chain.NetMode(s.Network) == chain.NetPasta {
		return fmt.Errorf("%w: a network with CIDR entries is set up per run", ErrNotPooled)
	}
	if len(s.Network.Secrets) > 0 {
		return fmt.Errorf("%w: a run with secrets has a CA of its own in its sandbox", ErrNotPooled)
	}
	if s.Git != nil {
		return fmt.Errorf("%w: a run's repository is cloned before its agent, which a take names", ErrNotPooled)
	}
	return nil
}
