package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// ErrNotCloned: the run's state records no commit cloned into its
// workspace (its clone failed, or its chain never got that far).
var ErrNotCloned = errors.New("sandbox: no cloned commit recorded")

// maxStateBytes bounds how much of state.ndjson ClonedCommit reads: a
// run's records before its agent starts are a few KiB.
const maxStateBytes = 1 << 20

// ClonedCommit is the commit the run's chain cloned into its workspace
// (Spec.Git), as its init recorded it in state.ndjson before the agent
// started: a file the agent holds no descriptor of and cannot reach, so
// the diff's baseline is the commit git checked out, whatever the agent
// did to the repository afterwards.
func ClonedCommit(dir journal.Dir) (string, error) {
	f, err := journal.OpenNoLinks(dir.State(), 0, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxStateBytes))
	sc.Buffer(nil, 64<<10)
	for sc.Scan() {
		var rec struct{ Phase, Status, Detail string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Phase == chain.GitClonePhase && rec.Status == "ok" && runspec.IsCommitID(rec.Detail) {
			return rec.Detail, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", journal.StateName, err)
	}
	return "", ErrNotCloned
}
