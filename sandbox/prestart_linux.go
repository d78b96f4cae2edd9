package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// closeWait bounds how long Close waits for an untaken chain's runner to
// end once its socket is closed.
const closeWait = 5 * time.Second

// Prestarted is a runner chain started ahead of its job (Prestart): its
// sandbox is built, and its init waits, before the agent, for a run to
// take it (Take). One take, one run: a chain is never used twice.
//
// An entry is not safe for concurrent use: its pool hands it to one
// start at a time.
type Prestarted struct {
	spec    Spec
	dir     journal.Dir
	sock    *os.File
	pid     int
	exited  <-chan struct{}
	taken   bool // Take began: the entry is a run's, or closed
	renamed bool // the directory is the run's now
}

// Prestart starts the runner chain of spec ahead of its job. spec is the
// sandbox's shape: everything but the job's own (see Take); its RunDir
// must be a new directory beside the run directories, named
// PoolEntryPrefix and more, and its RunID names the entry (its cgroup's
// name, if it has one). It returns once the sandbox is built and its init
// waits for the take. A chain whose worker goes away untaken (its
// socket's close) kills its sandbox and exits without a journal.
func Prestart(ctx context.Context, spec Spec, opts ...StartOption) (*Prestarted, error) {
	o, err := newStartOptions(opts)
	if err != nil {
		return nil, err
	}
	spec.Pooled = true
	if !IsPoolEntry(filepath.Base(spec.RunDir)) {
		return nil, fmt.Errorf("%w: a prestarted chain's directory %s must be named %s…", ErrInvalidSpec, spec.RunDir, PoolEntryPrefix)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := Poolable(spec); err != nil {
		return nil, err
	}
	dir := journal.Dir(spec.RunDir)
	made, err := prepareRunDir(ctx, dir, spec, nil, os.Geteuid(), os.Getegid(), nil)
	if err != nil {
		return nil, err
	}
	defer made.Close()
	mine, theirs, err := poolSocket()
	if err != nil {
		removeRunDir(dir, made)
		return nil, err
	}
	pid, exited, err := spawnRunner(ctx, o.binary, dir, theirs)
	theirs.Close()
	p := &Prestarted{spec: spec, dir: dir, sock: mine, pid: pid, exited: exited}
	if err == nil {
		var msg string
		if msg, err = p.reply(ctx); err != nil {
			err = fmt.Errorf("sandbox: waiting for prestarted runner %d to be ready: %w", pid, err)
		} else if msg != chain.PoolReady {
			err = fmt.Errorf("%w: the prestarted runner said %q, not %q; see %s", ErrStartFailed, msg, chain.PoolReady, dir.State())
		}
	}
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// poolSocket is a prestarted chain's socket pair: the worker's end,
// pollable, and the runner's.
func poolSocket() (mine, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: pool socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("sandbox: pool socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "pool"), os.NewFile(uintptr(fds[1]), "pool-runner"), nil
}

// Dir is the entry's directory until a run takes it.
func (p *Prestarted) Dir() journal.Dir { return p.dir }

// Exited is closed once the entry's runner has exited: taken and ended,
// or ended untaken.
func (p *Prestarted) Exited() <-chan struct{} { return p.exited }

// Fits reports whether a run of spec can take this chain: nil, or why
// not (wrapping ErrNotPooled).
func (p *Prestarted) Fits(spec Spec) error { return chain.Fits(p.spec, spec) }

// Alive reports whether the chain still waits for its take.
func (p *Prestarted) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return !p.taken
	}
}

// Take starts the run of spec on this chain, as Start would have started
// it cold, and returns once its runner has taken it. It lays the run out
// in the entry's directory (workspace seed, files, spec, input), renames
// the directory to spec.RunDir (which must not exist: ErrRunExists),
// calls the WithBeforeSpawn function (if it fails, the entry and the
// directory are removed, as Start does), creates the run's journal, and
// hands the runner the spec, journal and input; the runner tells the
// sandbox's init the agent's argv and environment, and the init starts
// it. The agent sees its workspace where the entry's was.
//
// A spec that does not fit (Fits) returns ErrNotPooled and leaves the
// entry as it was; a chain that has ended returns ErrPoolEntryGone.
// Either way nothing of the run exists and it may start cold. Any other
// error closes the entry: before the WithBeforeSpawn function has agreed,
// the run's directory does not exist; after it, it stays for diagnosis,
// as Start leaves it.
func (p *Prestarted) Take(ctx context.Context, spec Spec, input []byte, opts ...StartOption) (*Runner, error) {
	o, err := newStartOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Pooled {
		return nil, fmt.Errorf("%w: a run's spec is not a prestarted chain's", ErrInvalidSpec)
	}
	if err := p.Fits(spec); err != nil {
		return nil, err
	}
	if !p.Alive() {
		_ = p.Close()
		return nil, ErrPoolEntryGone
	}
	p.taken = true
	fail := func(err error) (*Runner, error) {
		_ = p.Close()
		return nil, err
	}
	if err := p.layOut(ctx, spec, input, o.seed); err != nil {
		return fail(err)
	}
	// The directory is the run's before the caller's last word, as Start's
	// is: a worker killed between its mark (the record says spawning) and
	// a rename would leave a run no recovery finds (the chaos suite's
	// cluster run lost one so). If the last word refuses, the directory
	// goes with the entry, as Start removes its own.
	dst := journal.Dir(spec.RunDir)
	if err := unix.Renameat2(unix.AT_FDCWD, string(p.dir), unix.AT_FDCWD, string(dst), unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%w: %s", ErrRunExists, dst)
		}
		return fail(fmt.Errorf("sandbox: take %s: %w", p.dir, err))
	}
	p.dir = dst
	if o.beforeSpawn != nil {
		if err := o.beforeSpawn(); err != nil {
			return fail(err)
		}
	}
	p.renamed = true
	files, err := takeFiles(dst)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrStartFailed, err))
	}
	err = p.send(files)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		return fail(fmt.Errorf("%w: hand the run to runner %d: %w", ErrStartFailed, p.pid, err))
	}
	msg, err := p.reply(ctx)
	// The runner has the take, or ended: the socket has served.
	p.sock.Close()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("sandbox: waiting for runner %d to take the run: %w (it may still take it)", p.pid, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrStartFailed, err)
	case msg != chain.ReadyOK:
		return nil, fmt.Errorf("%w: %s", ErrStartFailed, strings.TrimPrefix(msg, "error: "))
	}
	return &Runner{PID: p.pid, exited: p.exited}, nil
}

// layOut writes the run's own into the entry's directory: the workspace's
// seed and files, as prepareRunDir writes a cold run's, and its spec and
// input in place of the entry's.
func (p *Prestarted) layOut(ctx context.Context, spec Spec, input []byte, seed SeedFunc) error {
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = spec.SandboxIDs(0, 0)
	}
	if seed != nil {
		if err := seedRun(ctx, p.dir, seed, uid, gid); err != nil {
			return err
		}
	}
	if err := writeRunSeeds(ctx, p.dir, spec, uid, gid); err != nil {
		return err
	}
	// Rewritten in place, as their directory entries cost more to make
	// than the bytes to write (ext4); the runner has read the entry's.
	for path, b := range map[string][]byte{p.dir.Spec(): chain.MustJSON(spec), p.dir.Input(): input} {
		if err := rewrite(path, b); err != nil {
			return fmt.Errorf("sandbox: write %s: %w", path, err)
		}
	}
	return nil
}

// rewrite replaces the contents of the file at path, never through a link.
func rewrite(path string, b []byte) error {
	f, err := journal.OpenNoLinks(path, os.O_WRONLY|os.O_TRUNC, 0)
	return fill(f, err, b)
}

// takeFiles opens the taken run's spec and input and creates its journal,
// in the order the runner expects them.
func takeFiles(dir journal.Dir) ([]*os.File, error) {
	var files []*os.File
	open := func(path string, flag int, perm fs.FileMode) error {
		f, err := journal.OpenNoLinks(path, flag, perm)
		if err == nil {
			files = append(files, f)
		}
		return err
	}
	err := open(dir.Spec(), os.O_RDONLY, 0)
	if err == nil {
		// Created here, once: the runner took the run if and only if a
		// journal exists (runnerTookRun), as for a cold start.
		err = open(dir.Journal(), os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
	}
	if err == nil {
		err = open(dir.Input(), os.O_RDONLY, 0)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	return files, nil
}

// send writes the take with files.
func (p *Prestarted) send(files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	rc, err := p.sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte(chain.TakeWord), unix.UnixRights(fds...), nil, 0)
		return !errors.Is(serr, unix.EAGAIN)
	}); err != nil {
		return err
	}
	return serr
}

// reply reads the runner's next message, until ctx ends.
func (p *Prestarted) reply(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, func() { _ = p.sock.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 64<<10)
	n, err := p.sock.Read(buf)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("runner-outer %d ended without answering (%w); see %s and %s", p.pid, err, p.dir.State(), p.dir.Stderr())
	}
	return string(buf[:n]), nil
}

// Close discards an entry no run has taken: its runner, seeing the socket
// close, kills the sandbox and exits, and Close removes its directory
// once it has (waiting up to closeWait). Once a run has taken the entry,
// Close only lets go of it.
func (p *Prestarted) Close() error {
	p.sock.Close()
	if p.renamed {
		return nil
	}
	p.taken = true
	if p.exited != nil {
		select {
		case <-p.exited:
		case <-time.After(closeWait):
			return fmt.Errorf("sandbox: prestarted runner %d still running %v after its socket closed; %s left", p.pid, closeWait, p.dir)
		}
	}
	if err := ReleaseWorkspace(p.dir); err != nil {
		return err
	}
	return os.RemoveAll(string(p.dir))
}

// RemoveStalePoolEntries removes the prestarted chains' directories in
// runs whose runners have ended (a worker killed with its pool, say) and
// that have not changed for settled: those of a live runner stay, and so
// do those another worker may be laying out (before its runner holds the
// lock).
func RemoveStalePoolEntries(runs string, settled time.Duration) error {
	entries, err := os.ReadDir(runs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !IsPoolEntry(e.Name()) {
			continue
		}
		dir := journal.Dir(filepath.Join(runs, e.Name()))
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < settled {
			continue
		}
		if alive, err := Alive(dir); err != nil || alive {
			errs = append(errs, err)
			continue
		}
		if err := ReleaseWorkspace(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.RemoveAll(string(dir)))
	}
	return errors.Join(errs...)
}

// WaitingPoolEntries lists the prestarted chains in runs with nothing left
// to do before a take: their runner holds the entry, and their exec stage
// waits for the agent's spec (its state record says so).
func WaitingPoolEntries(runs string) []journal.Dir {
	entries, _ := os.ReadDir(runs)
	var out []journal.Dir
	for _, e := range entries {
		if !e.IsDir() || !IsPoolEntry(e.Name()) {
			continue
		}
		dir := journal.Dir(filepath.Join(runs, e.Name()))
		b, _ := os.ReadFile(dir.State())
		if alive, _ := Alive(dir); alive && bytes.Contains(b, []byte(`"phase":"`+chain.PoolWaitPhase+`"`)) {
			out = append(out, dir)
		}
	}
	return out
}
