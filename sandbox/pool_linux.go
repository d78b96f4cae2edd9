package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/journal"
)

// A root worker's bounded workspace is an ext4 image that mkfs.ext4 makes
// (tens of milliseconds idle, past its 30 s bound when hundreds of runs
// start at once on a loaded host). The pool makes them ahead: per state
// directory and (size, uid, gid), up to poolImages images ready in
// <state>/workspace-pool/<pid>/, made by this process in the background
// and each moved (renamed) into exactly one run directory. An image in
// the pool was never mounted; one that was taken is the run's and never
// comes back. A start that finds no image of its size makes its own.

// poolImages is how many images of one size the pool keeps ready.
const poolImages = 8

type poolKey struct {
	dir      string // this process's pool directory
	size     uint64
	uid, gid int
}

type imagePool struct {
	key     poolKey
	mu      sync.Mutex
	ready   []string // paths of made images, newest last
	filling bool
	takes   int // starts that asked for an image
}

var (
	poolsMu sync.Mutex
	pools   = map[poolKey]*imagePool{}
	// cleaned holds the pool roots whose dead processes' leftovers this
	// process removed.
	cleaned = map[string]bool{}
)

// poolDir is the directory of this process's images for the runs beside
// dir: <state>/workspace-pool/<pid>, where dir is <state>/runs/<id>.
func poolDir(dir journal.Dir) string {
	return filepath.Join(filepath.Dir(filepath.Dir(string(dir))), "workspace-pool", strconv.Itoa(os.Getpid()))
}

// takeImage moves a ready image of the size and owner into dir as its
// workspace image, and has the pool refilled. It reports false when it
// had none (the caller makes one): the pool is empty or the move failed.
func takeImage(dir journal.Dir, size uint64, uid, gid int) bool {
	p := pool(poolKey{dir: poolDir(dir), size: size, uid: uid, gid: gid})
	defer p.refill()
	for {
		p.mu.Lock()
		n := len(p.ready)
		if n == 0 {
			p.mu.Unlock()
			return false
		}
		img := p.ready[n-1]
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		// Never over an existing file; the image leaves the pool whole.
		err := unix.Renameat2(unix.AT_FDCWD, img, unix.AT_FDCWD, workspaceImage(dir), unix.RENAME_NOREPLACE)
		if err == nil {
			return true
		}
		_ = os.Remove(img)
		if !errors.Is(err, unix.ENOENT) {
			return false // another filesystem, say: make one in place
		}
	}
}

func pool(k poolKey) *imagePool {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if root := filepath.Dir(k.dir); !cleaned[root] {
		cleaned[root] = true
		removeDeadPools(root)
	}
	p := pools[k]
	if p == nil {
		p = &imagePool{key: k}
		pools[k] = p
	}
	return p
}

// removeDeadPools removes the pool directories of processes that no
// longer run (a worker that died or stopped): their images are nobody's.
func removeDeadPools(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		pid, err := parsePID([]byte(e.Name()))
		if err != nil {
			continue
		}
		if pid == os.Getpid() || errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// refill makes images in the background until poolImages are ready; one
// filler per pool at a time, one mkfs at a time, each within mkfsTimeout.
// A failure stops it until the next take. A state directory that saw one
// start (a test's, a one-off) gets no pool: from the second on it does.
func (p *imagePool) refill() {
	p.mu.Lock()
	p.takes++
	if p.filling || p.takes < 2 || len(p.ready) >= poolImages {
		p.mu.Unlock()
		return
	}
	p.filling = true
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			p.filling = false
			p.mu.Unlock()
		}()
		// The state directory's own pool directory, never the state
		// directory itself: a filler outliving its state directory stops.
		if err := os.Mkdir(filepath.Dir(p.key.dir), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return
		}
		if err := os.Mkdir(p.key.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return
		}
		for {
			p.mu.Lock()
			enough := len(p.ready) >= poolImages
			p.mu.Unlock()
			if enough {
				return
			}
			final := filepath.Join(p.key.dir, fmt.Sprintf("%d-%d-%d-%s.img", p.key.size, p.key.uid, p.key.gid, journal.NewNonce()[:16]))
			tmp := final + ".tmp"
			if err := makeImage(context.Background(), tmp, p.key.size, p.key.uid, p.key.gid); err != nil {
				_ = os.Remove(tmp)
				return
			}
			// Complete images only: a filler killed mid-mkfs leaves a .tmp.
			if err := os.Rename(tmp, final); err != nil {
				_ = os.Remove(tmp)
				return
			}
			p.mu.Lock()
			p.ready = append(p.ready, final)
			p.mu.Unlock()
		}
	}()
}

// makeImage creates path as a sparse image of size bytes holding a fresh
// ext4 filesystem whose root is uid:gid's.
func makeImage(ctx context.Context, path string, size uint64, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("size the image: %w", err)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("mkfs.ext4 not found (install e2fsprogs): %w", err)
	}
	// No journal and no reserved blocks: the workspace is one run's
	// scratch space, and the agent gets every byte of its limit. Lazy
	// inode tables (never zeroed, see noinit_itable) keep the image sparse;
	// no resize inode (a workspace never grows) spares mkfs the reserved
	// descriptor blocks: 172 KiB written instead of 2.2 MiB for 4 GiB,
	// and a quarter to a third less time when many runs start at once.
	cmd := exec.Command(mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", max(uid, 0), max(gid, 0)), path)
	if out, err := bounded.Output(ctx, mkfsTimeout, cmd); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
