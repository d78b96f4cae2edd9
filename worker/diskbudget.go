package worker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// errNoDiskRoom: the state filesystem cannot take another run beside what
// the node's running runs may still write and the reserve (diskBudget).
var errNoDiskRoom = errors.New("no room on the state filesystem for another run")

// runOverhead is what a run directory holds beside its journal, stderr,
// workspace image and diff baseline: its spec, input, state records.
const runOverhead = 4 << 20

// diskLogEvery spaces the budget's "held" log lines while it holds jobs.
const diskLogEvery = 30 * time.Second

// runNeed is the most a run may write on the state filesystem: its
// journal (the output limit, input records included), its stderr (the
// stderr limit), its workspace image when the workspace is bounded (a
// root worker's: limits.disk; a plain directory bounds nothing, so it is
// not counted), and a diff's baseline when it is laid out from an archive.
type runNeed struct {
	journal, stderr, image, baseline int64
}

func (n runNeed) total() int64 { return n.journal + n.stderr + n.image + n.baseline + runOverhead }

func (w *Worker) needOf(lim runspec.Limits, diff, archive bool) runNeed {
	n := runNeed{journal: int64(lim.Output), stderr: int64(lim.StderrBytes())}
	if n.journal == 0 {
		n.journal = int64(config.DefaultOutputLimit)
	}
	if w.boundedDisk {
		n.image = int64(lim.Disk)
		if n.image == 0 {
			n.image = int64(sandbox.DefaultDiskBytes)
		}
	}
	if diff && archive {
		n.baseline = w.cfg.WorkspaceLimits().MaxBytes
	}
	return n
}

// remaining is what the run in dir, whose need is n, may still write:
// its need less what its files hold already.
func remaining(dir journal.Dir, n runNeed) int64 {
	size := func(path string) (int64, int64) {
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil {
			return 0, 0
		}
		return st.Size, st.Blocks * 512
	}
	j, _ := size(dir.Journal())
	e, _ := size(dir.Stderr())
	_, img := size(filepath.Join(string(dir), sandbox.WorkspaceImageName))
	return max(0, n.journal-j) + max(0, n.stderr-e) + max(0, n.image-img) + n.baseline + runOverhead
}

// admit is the disk budget (Handlers.Admit): it lets j start only if the
// state filesystem's free space covers what the node's live runs may
// still write, j's need and the reserve. A job it refuses waits in the
// stream; running runs are never starved of room by a start.
func (w *Worker) admit(j consumer.Job) error {
	if !w.cfg.DiskBudget {
		return nil
	}
	inv := j.Invocation
	need := w.needOf(inv.Limits, inv.Outputs.Diff, j.Job.Workspace != nil)
	runs := filepath.Join(w.stateDir, "runs")
	var fs unix.Statfs_t
	if err := unix.Statfs(runs, &fs); err != nil {
		// Unmeasured, the budget cannot hold anything back.
		w.log.Warn().Err(err).Msg("disk budget: cannot read the state filesystem's free space; run admitted")
		return nil
	}
	free := int64(fs.Bavail) * fs.Bsize
	held := w.committed(runs)
	reserve := int64(w.cfg.DiskReserve)
	if left := free - held - need.total(); left < reserve {
		w.metrics.heldForDisk.Inc()
		err := fmt.Errorf("%w: %d bytes free, running runs may write %d more, this run %d, reserve %d",
			errNoDiskRoom, free, held, need.total(), reserve)
		w.mu.Lock()
		quiet := time.Since(w.diskHeldLog) < diskLogEvery
		if !quiet {
			w.diskHeldLog = time.Now()
		}
		w.mu.Unlock()
		if !quiet {
			w.log.Warn().Err(err).Str("run_id", j.Job.RunID).Msg("disk budget: job left in the stream until there is room")
		}
		return err
	}
	w.mu.Lock()
	w.admitted[j.Job.RunID] = need
	if !w.diskHeldLog.IsZero() {
		w.diskHeldLog = time.Time{}
		w.log.Info().Str("run_id", j.Job.RunID).Msg("disk budget: room again; runs start")
	}
	w.mu.Unlock()
	return nil
}

// unadmit ends the count of a run admit let in whose start returned.
func (w *Worker) unadmit(runID string) {
	w.mu.Lock()
	delete(w.admitted, runID)
	w.mu.Unlock()
}

// committed is what the node's live runs may still write on the state
// filesystem: runs a runner holds (this node's workers'), and the runs
// this worker admitted, whose runner may not exist yet (counted whole
// until their spec is written). A prestarted sandbox not yet taken
// counts nothing: no agent writes there until a run takes it, and that
// run was admitted; counted, every profile's default pool held the
// budget (a node with 38 GB free held its runs back behind six of them).
func (w *Worker) committed(runs string) int64 {
	w.mu.Lock()
	admitted := maps.Clone(w.admitted)
	w.mu.Unlock()
	entries, _ := os.ReadDir(runs)
	var total int64
	for _, e := range entries {
		if !e.IsDir() || sandbox.IsPoolEntry(e.Name()) {
			continue
		}
		dir := journal.Dir(filepath.Join(runs, e.Name()))
		need, mine := admitted[e.Name()]
		delete(admitted, e.Name())
		if !mine {
			if exists(dir.Finished()) {
				continue
			}
			if alive, err := sandbox.Alive(dir); err == nil && !alive {
				continue
			}
		}
		spec, err := sandbox.ReadSpec(dir)
		if err != nil {
			if mine {
				total += need.total()
			}
			continue
		}
		total += remaining(dir, w.needOf(spec.Limits, spec.Outputs.Diff, spec.Workspace != nil))
	}
	for _, need := range admitted {
		total += need.total()
	}
	return total
}
