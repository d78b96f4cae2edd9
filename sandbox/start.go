package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/batonhq/baton/internal/fstree"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

var (
	// ErrRunExists refuses to prepare a run directory that already exists:
	// a run directory belongs to one start, so no run id starts twice.
	ErrRunExists = errors.New("sandbox: run directory already exists")
	// ErrStartFailed is returned when runner-outer reported that it could
	// not take the run or start its chain.
	ErrStartFailed = errors.New("sandbox: runner failed to start")
	// ErrNotRunning is returned by Cancel when no runner holds the run.
	ErrNotRunning = errors.New("sandbox: runner not running")
	// ErrNotRunner is returned by Cancel when the run's pid file names a
	// process other than the one holding the run's lock: it is signalled
	// no more than any other.
	ErrNotRunner = errors.New("sandbox: the pid file does not name the run's runner")
	// ErrTryAgain is returned by Cancel when a runner holds the run but
	// cannot be signalled yet (it has not written its pid, or the kernel's
	// lock list did not show it): the runner is alive, so the caller
	// retries shortly rather than take the run for ended.
	ErrTryAgain = errors.New("sandbox: the runner cannot be signalled yet; try again")
)

// Runner is a started runner chain.
type Runner struct {
	// PID is runner-outer's pid. Signal it only through Cancel, which
	// checks the run's lock first so a recycled pid is never signalled.
	PID int
	// exited is closed once runner-outer has exited, and let go of the
	// run's lock, and its starter has reaped it.
	exited <-chan struct{}
}

// Exited returns a channel closed once the runner has exited: no runner
// holds the run any more, as WatchRunner's channel says, but known from
// the starter's own child, without reading who holds the lock (a read of
// /proc/locks waits for an RCU grace period, milliseconds).
func (r *Runner) Exited() <-chan struct{} { return r.exited }

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	binary      string
	beforeSpawn func() error
	seed        SeedFunc
}

// SeedFunc fills a new run's workspace, ws, and home (HOME) before its
// seed files are written over them and before the runner is spawned. uid
// and gid are whom what it creates must belong to (the sandbox ids of a
// root worker's run), or -1 when the files stay the caller's.
type SeedFunc func(ctx context.Context, ws, home *os.Root, uid, gid int) error

// WithSeed has Start fill the workspace and home with fn (a workspace
// archive, a session's checkpoint) once they exist, with their disk
// limit, and before the spec's seed files are written. If fn fails, Start removes the run directory, spawns
// nothing and returns fn's error: no agent ever sees a half-filled
// workspace.
func WithSeed(fn SeedFunc) StartOption {
	return func(o *startOptions) { o.seed = fn }
}

func newStartOptions(opts []StartOption) (startOptions, error) {
	o := startOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("sandbox: find the baton binary: %w", err)
		}
		o.binary = exe
	}
	return o, nil
}

// WithBeforeSpawn has Start call fn once the run directory is laid out and
// before the runner is spawned. If fn fails, Start removes the directory,
// spawns nothing and returns fn's error: the caller's last word on whether
// this run may start here (a worker's compare-and-set of the run record).
func WithBeforeSpawn(fn func() error) StartOption {
	return func(o *startOptions) { o.beforeSpawn = fn }
}

// WithBinary sets the binary whose runner-outer subcommand Start runs:
// baton-runner or baton, which have the same stages (default: the running
// executable).
func WithBinary(path string) StartOption {
	return func(o *startOptions) { o.binary = path }
}

// Start prepares the run directory and spawns `<binary> runner-outer`
// detached from the caller: its own session, stdio on /dev/null, no
// parent-death signal and no pipe kept, so the caller's death never
// reaches the agent. It returns once the runner holds the run's lock and
// has started its chain, or with the runner's startup error (wrapping
// ErrStartFailed).
//
// spec.RunDir must not exist (ErrRunExists). Start creates it 0700 with
// the workspace (owned by the sandbox uid when the caller is root), the
// seed files, the spec (0600) and the input (0600, which the runner writes to the
// agent's stdin pipe). If
// preparing fails, Start removes what it created; once the runner is
// spawned, the directory stays for diagnosis. ctx bounds only the wait
// for readiness: a runner that was spawned may still start after ctx ends.
func Start(ctx context.Context, spec Spec, input []byte, opts ...StartOption) (*Runner, error) {
	o, err := newStartOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	dir := journal.Dir(spec.RunDir)
	made, err := prepareRunDir(ctx, dir, spec, input, os.Geteuid(), os.Getegid(), o.seed)
	if err != nil {
		return nil, err
	}
	defer made.Close()
	if o.beforeSpawn != nil {
		if err := o.beforeSpawn(); err != nil {
			removeRunDir(dir, made)
			return nil, err
		}
	}
	pid, exited, err := spawnRunner(ctx, o.binary, dir, nil)
	if err != nil {
		return nil, err
	}
	return &Runner{PID: pid, exited: exited}, nil
}

// Respawn spawns the runner of a run directory that Start laid out but
// whose runner never journaled: its starter died, or was stopped, between
// marking the run spawning and the runner taking the run. It waits for
// readiness as Start does. Two runners of one directory cannot both run:
// the run's lock admits one, and a runner refuses a directory that has a
// journal, so a respawn never starts a second agent.
func Respawn(ctx context.Context, dir journal.Dir, opts ...StartOption) (*Runner, error) {
	o, err := newStartOptions(opts)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir.Journal()); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has a journal: its runner ran", ErrStartFailed, dir)
	}
	pid, exited, err := spawnRunner(ctx, o.binary, dir, nil)
	if err != nil {
		return nil, err
	}
	return &Runner{PID: pid, exited: exited}, nil
}

// prepareRunDir lays out a new run directory, removing it if any step
// fails. It returns the directory open, for removeRunDir; the caller
// closes it.
func prepareRunDir(ctx context.Context, dir journal.Dir, spec Spec, input []byte, euid, egid int, seed SeedFunc) (_ *os.File, err error) {
	if err := os.MkdirAll(filepath.Dir(string(dir)), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: create the runs directory: %w", err)
	}
	if err := os.Mkdir(string(dir), 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s", ErrRunExists, dir)
		}
		return nil, fmt.Errorf("sandbox: create the run directory: %w", err)
	}
	made, err := os.OpenFile(string(dir), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: create the run directory: %w", err)
	}
	defer func() {
		if err != nil {
			removeRunDir(dir, made)
			made.Close()
		}
	}()
	// A root runner's agent is the sandbox uid on the host: its workspace
	// must be its own. Anyone else's agent is themselves.
	// (-1 leaves an id unchanged.)
	uid, gid := -1, -1
	if euid == 0 {
		uid, gid = spec.SandboxIDs(euid, egid)
	}
	if err := os.Mkdir(dir.Agent(), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: create the agent's directory: %w", err)
	}
	if euid == 0 {
		// limits.disk bounds everything the agent writes in its
		// workspace and home: they are a filesystem of that size.
		if err := mountWorkspace(ctx, dir, spec.Limits.DiskBytes(), uid, gid); err != nil {
			return nil, err
		}
	}
	// The agent's, as an agent is the sandbox uid on the host (a root
	// runner's), or the caller.
	ws := dir.Workspace()
	for _, d := range []string{ws, dir.Home()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: create %s: %w", d, err)
		}
	}
	for _, d := range []string{dir.Agent(), ws, dir.Home()} {
		if err := os.Lchown(d, uid, gid); err != nil {
			return nil, fmt.Errorf("sandbox: give %s to the sandbox uid: %w", d, err)
		}
	}
	if seed != nil {
		if err := seedRun(ctx, dir, seed, uid, gid); err != nil {
			return nil, err
		}
	}
	// The job's files go over the archive's: a job tweaks a shared
	// archive with a few files of its own.
	if err := writeRunSeeds(ctx, dir, spec, uid, gid); err != nil {
		return nil, err
	}
	if err := writeNew(dir.Spec(), chain.MustJSON(spec)); err != nil {
		return nil, fmt.Errorf("sandbox: write the spec: %w", err)
	}
	if err := writeNew(dir.Input(), input); err != nil {
		return nil, fmt.Errorf("sandbox: write the input: %w", err)
	}
	return made, nil
}

// removeRunDir removes a run directory this start created, made, unless
// the path is no longer that directory: a worker that took the run over
// (its first worker, this one, having lost it) clears and lays it out
// anew. made is held open, so its inode cannot be reused meanwhile.
func removeRunDir(dir journal.Dir, made *os.File) {
	mine, err := made.Stat()
	if err != nil {
		return
	}
	if cur, err := os.Lstat(string(dir)); err != nil || !os.SameFile(cur, mine) {
		return
	}
	_ = ReleaseWorkspace(dir)
	_ = os.RemoveAll(string(dir))
}

// seedRun has seed fill the run's workspace and home.
func seedRun(ctx context.Context, dir journal.Dir, seed SeedFunc, uid, gid int) error {
	ws, err := os.OpenRoot(dir.Workspace())
	if err != nil {
		return fmt.Errorf("sandbox: open the workspace: %w", err)
	}
	defer ws.Close()
	home, err := os.OpenRoot(dir.Home())
	if err != nil {
		return fmt.Errorf("sandbox: open the home: %w", err)
	}
	defer home.Close()
	if err := seed(ctx, ws, home, uid, gid); err != nil {
		return fmt.Errorf("sandbox: seed the workspace: %w", err)
	}
	return nil
}

// writeRunSeeds writes a run's seed files into its workspace, and its
// home's into its home.
func writeRunSeeds(ctx context.Context, dir journal.Dir, spec Spec, uid, gid int) error {
	if err := WriteSeeds(ctx, dir.Workspace(), spec.Files, uid, gid); err != nil {
		return err
	}
	if err := WriteSeeds(ctx, dir.Home(), spec.HomeFiles, uid, gid); err != nil {
		return fmt.Errorf("%w (in the home)", err)
	}
	return nil
}

// WriteSeeds writes the seed files under ws as later entries of a
// workspace archive (fstree.WriteFiles): by descriptors from the top, so
// no name (or symlink) reaches outside it and a deep path costs a few
// syscalls a level, replacing a file or link of the same name, giving
// each file and directory it creates to uid and gid (-1 leaves an id
// unchanged). Start writes a run's; the worker writes them again over a
// workspace archive to lay out the diff's baseline as the run was seeded.
func WriteSeeds(ctx context.Context, ws string, files map[string]string, uid, gid int) error {
	if len(files) == 0 {
		return nil
	}
	for name := range files {
		if _, err := runspec.SeedPath(name); err != nil {
			return err
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("sandbox: open the workspace: %w", err)
	}
	defer root.Close()
	if err := fstree.WriteFiles(ctx, root, files, fstree.Options{Chown: uid >= 0 || gid >= 0, UID: uid, GID: gid}); err != nil {
		return fmt.Errorf("sandbox: seed files: %w", err)
	}
	return nil
}

// writeNew creates path 0600, refusing one that exists. No fsync: the
// runner reads it at once, and a host crash ends the run anyway.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	return fill(f, err, b)
}

// fill writes b to f, just opened (with err), and closes it.
func fill(f *os.File, err error, b []byte) error {
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
