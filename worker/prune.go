package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// Pruned is a run directory Prune removed (or, dry, would remove).
type Pruned struct {
	RunID string
	// Age is how long ago the run finished (its finished marker's time).
	Age time.Duration
	// Bytes is the disk space the directory's files took: their allocated
	// blocks, so a sparse workspace image counts what it used, not its
	// apparent size.
	Bytes int64
}

type pruneOptions struct {
	dryRun bool
	now    func() time.Time
	skip   func(runID string) bool
}

// PruneOption configures Prune.
type PruneOption func(*pruneOptions)

// PruneDryRun lists what would be removed and removes nothing.
func PruneDryRun() PruneOption { return func(o *pruneOptions) { o.dryRun = true } }

// pruneSkip leaves the runs skip reports alone (the worker's own).
func pruneSkip(skip func(runID string) bool) PruneOption {
	return func(o *pruneOptions) { o.skip = skip }
}

// Prune removes the run directories of stateDir whose run finished more
// than olderThan ago: the finished marker, written once the terminal
// status is published and recorded, is older than that, and no runner
// holds the run's lock. A run without the marker is never removed, however
// old: its journal may still have lines to publish. The journal is gone
// with the directory; the events stay in the stream for its own max age.
// Prune goes on past a directory it cannot remove and returns every such
// failure joined.
func Prune(ctx context.Context, stateDir string, olderThan time.Duration, opts ...PruneOption) ([]Pruned, error) {
	o := pruneOptions{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if olderThan <= 0 {
		return nil, fmt.Errorf("worker: prune: age %s must be positive", olderThan)
	}
	runs := filepath.Join(stateDir, "runs")
	entries, err := os.ReadDir(runs)
	if err != nil {
		return nil, fmt.Errorf("worker: prune: %w", err)
	}
	var out []Pruned
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		id := e.Name()
		if !e.IsDir() || !protocol.ValidRunID(id) || (o.skip != nil && o.skip(id)) {
			continue
		}
		dir := journal.Dir(filepath.Join(runs, id))
		fi, err := os.Lstat(dir.Finished())
		if err != nil || !fi.Mode().IsRegular() {
			continue // unfinished, or not a run directory
		}
		age := o.now().Sub(fi.ModTime())
		if age < olderThan {
			continue
		}
		// The marker follows the sentinel, but runner-outer may still be
		// cleaning the sandbox up; and with its lock free, the sandbox's
		// pid namespace and every process of the agent are gone.
		if alive, err := sandbox.Alive(dir); err != nil || alive {
			if err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", id, err))
			}
			continue
		}
		p := Pruned{RunID: id, Age: age, Bytes: treeSize(string(dir))}
		if !o.dryRun {
			if err := sandbox.ReleaseWorkspace(dir); err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", id, err))
				continue
			}
			if err := removeTree(string(dir)); err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", id, err))
				continue
			}
		}
		out = append(out, p)
	}
	// And the directories of prestarted sandboxes a killed worker left.
	if !o.dryRun {
		if err := sandbox.RemoveStalePoolEntries(runs, poolEntrySettled); err != nil {
			errs = append(errs, fmt.Errorf("prestarted sandboxes: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

// pruneAt has Prune judge ages against now instead of the system's clock.
func pruneAt(now func() time.Time) PruneOption {
	return func(o *pruneOptions) { o.now = now }
}

// pruner removes this node's finished runs past the retention, and the
// installed binaries of earlier deploys, at a tenth of the retention
// (between 5 s and an hour). It holds only what that needs.
type pruner struct {
	stateDir  string
	retention time.Duration
	active    func(runID string) bool // the worker's own runs: never pruned
	installed []string                // this worker's binaries, claimed at each pass
	pruned    prometheus.Counter
	log       zerolog.Logger
	clock     clock.Clock
}

func (w *Worker) pruner() *pruner {
	return &pruner{stateDir: w.stateDir, retention: w.cfg.RunRetention, active: w.isActive,
		installed: []string{w.binary, w.runner}, pruned: w.metrics.runsPruned, log: w.log, clock: w.clock}
}

// every is how long the pruner sleeps between passes.
func (p *pruner) every() time.Duration { return min(max(p.retention/10, 5*time.Second), time.Hour) }

func (p *pruner) run(ctx context.Context) {
	for p.clock.Sleep(ctx, p.every()) {
		p.pass(ctx)
	}
}

// pass prunes once.
func (p *pruner) pass(ctx context.Context) {
	pruned, err := Prune(ctx, p.stateDir, p.retention, pruneSkip(p.active), pruneAt(p.clock.Now))
	for _, r := range pruned {
		p.pruned.Inc()
		p.log.Info().Str("run_id", r.RunID).Dur("age", r.Age).Int64("bytes", r.Bytes).Msg("pruned finished run")
	}
	if err != nil && ctx.Err() == nil {
		p.log.Warn().Err(err).Msg("prune finished runs")
	}
	p.claim()
	removed, err := pruneBinaries(filepath.Join(p.stateDir, "bin"), p.clock.Now().Add(-staleBinaries))
	for _, path := range removed {
		p.log.Info().Str("path", path).Msg("pruned installed binary of an earlier deploy")
	}
	if err != nil && ctx.Err() == nil {
		p.log.Warn().Err(err).Msg("prune installed binaries")
	}
}

// treeSize adds up the blocks allocated to the regular files under root.
func treeSize(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
		}
		return nil
	})
	return n
}

// removeTree removes root and everything under it. The agent may have
// left directories its owner cannot write or read (mode 0): those are
// made 0700 and the removal is tried again. Symbolic links are never
// followed (the agent is dead, so nothing swaps a directory for one
// meanwhile).
func removeTree(root string) error {
	if err := os.RemoveAll(root); err == nil {
		return nil
	}
	openUp(root)
	return os.RemoveAll(root)
}

// openUp makes every real directory under dir 0700.
func openUp(dir string) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	if fi.Mode().Perm()&0o700 != 0o700 {
		_ = os.Chmod(dir, 0o700)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() { // from lstat: a symlink is not a directory here
			openUp(filepath.Join(dir, e.Name()))
		}
	}
}

// Binaries a root worker installed (see installBinary) are pruned too:
// every deploy adds a copy of baton and baton-runner to <state-dir>/bin.
// A live worker claims its copies at each prune (their mtime), at most an
// hour apart whatever its runRetention; a copy no worker claimed for
// staleBinaries and no process runs (a runner of an earlier deploy may) is
// removed. Installs and prunes of a node's workers take the directory's
// lock, so a copy being claimed is never removed under its worker.
const staleBinaries = 3 * time.Hour

// claim marks this worker's installed copies as in use.
func (p *pruner) claim() {
	bin := filepath.Join(p.stateDir, "bin") + string(filepath.Separator)
	now := p.clock.Now()
	for _, path := range p.installed {
		if strings.HasPrefix(path, bin) {
			if err := os.Chtimes(path, now, now); err != nil {
				p.log.Warn().Err(err).Str("path", path).Msg("claim installed binary")
			}
		}
	}
}

// pruneBinaries removes the installed binaries in dir (baton-<hash>,
// baton-runner-<hash>) unclaimed since before staleBefore that no process
// executes, and returns their paths.
func pruneBinaries(dir string, staleBefore time.Time) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	running := executables()
	var out []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !installedName(name) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.ModTime().Before(staleBefore) || running[fileID(fi)] {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// installedName reports whether name is one installBinary gives:
// baton-<16 hex> or baton-runner-<16 hex>.
func installedName(name string) bool {
	rest, ok := strings.CutPrefix(name, RunnerName+"-")
	if !ok {
		rest, ok = strings.CutPrefix(name, "baton-")
	}
	if !ok || len(rest) != 16 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
