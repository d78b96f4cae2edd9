package worker

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// discardWorkspace unmounts a finished run's bounded workspace, which
// frees its loop device, and removes its image: a mount kept for the run
// retention slows every later sandbox start (each new mount namespace
// copies the table), and the image holds up to limits.disk of the state
// filesystem. Never while a runner holds the run.
func discardWorkspace(dir journal.Dir, log zerolog.Logger) {
	if !exists(filepath.Join(string(dir), sandbox.WorkspaceImageName)) {
		return // unbounded (a non-root worker's), or given back already
	}
	// The runner ends just after the sentinel it wrote, which is what
	// ended the run.
	for end := time.Now().Add(discardWait); ; time.Sleep(20 * time.Millisecond) {
		alive, err := sandbox.Alive(dir)
		if err == nil && !alive {
			break
		}
		if time.Now().After(end) {
			log.Warn().Err(err).Str("run_dir", string(dir)).Msgf("a finished run's runner still holds it after %v: its workspace stays until the next worker start or the prune", discardWait)
			return
		}
	}
	if err := sandbox.DiscardWorkspace(dir); err != nil {
		log.Warn().Err(err).Str("run_dir", string(dir)).Msg("give back a finished run's workspace; the prune does it later")
	}
}

// discardWait bounds the wait for a finished run's runner to exit.
const discardWait = 5 * time.Second

// finishedWorkspaces gives back, once at start, the workspaces of the
// finished runs of the state directory that still have theirs: a
// predecessor killed between a run's end and its discard, or one from
// before discards.
type finishedWorkspaces struct {
	runsDir string
	log     zerolog.Logger
}

func (f finishedWorkspaces) run(context.Context) {
	entries, err := os.ReadDir(f.runsDir)
	if err != nil {
		f.log.Warn().Err(err).Msg("give back finished runs' workspaces")
		return
	}
	n := 0
	for _, e := range entries {
		dir := journal.Dir(filepath.Join(f.runsDir, e.Name()))
		if !e.IsDir() || !exists(dir.Finished()) || !exists(filepath.Join(string(dir), sandbox.WorkspaceImageName)) {
			continue
		}
		discardWorkspace(dir, f.log)
		n++
	}
	if n > 0 {
		f.log.Info().Int("runs", n).Msg("gave back finished runs' workspaces left mounted")
	}
}
