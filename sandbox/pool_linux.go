package sandbox

import (
	"context"
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
// (about 12 ms alone, past its 30 s bound when hundreds of runs start at
// once on a loaded host), on a loop device, mounted (1-3 ms more). The
// pool makes them ahead: per runs directory and (size, uid, gid), up to
// poolImages images, made by this process in the background as unnamed
// files (O_TMPFILE) in the runs directory, each attached to a loop device
// and mounted detached (fsmount: a mount in no namespace, held by a
// descriptor). A start links one into its run directory as its
// workspace.img and moves its mount onto the workspace: an image was
// never used before, is only ever one run's, and never comes back.
// Unnamed and detached, a pooled image is nothing once the process ends:
// closing the mount's descriptor unmounts it, which frees its loop
// device (autoclear), and the pool leaves nothing in the directory or
// the mount table to clean up. A start that finds none of its size makes
// its own. Where the new mount API is refused (a container's seccomp
// profile older than it; the kernel has it since 5.2, and baton needs
// 5.12), the pool keeps its images unmounted and a start mounts its own.

// poolImages is how many images of one size the pool keeps ready.
const poolImages = 8

type poolKey struct {
	runs     string // the runs directory: the run directory's parent
	size     uint64
	uid, gid int
}

type imagePool struct {
	key     poolKey
	mu      sync.Mutex
	ready   []pooledImage // newest last
	filling bool
	takes   int // starts that asked for an image
}

// pooledImage is an unnamed image and, unless the kernel refused, its
// detached mount.
type pooledImage struct {
	img *os.File
	mnt *os.File // nil: not mounted
}

var (
	poolsMu sync.Mutex
	pools   = map[poolKey]*imagePool{}
)

// takeImage links a ready image of the size and owner into dir as its
// workspace image, and has the pool refilled. It returns the image's
// detached mount, if it has one, for the caller to clone the workspace
// and home from (and close). It reports false when it had none (the caller
// makes one): the pool is empty or the link failed.
func takeImage(dir journal.Dir, size uint64, uid, gid int) (*os.File, bool) {
	p := pool(poolKey{runs: filepath.Dir(string(dir)), size: size, uid: uid, gid: gid})
	defer p.refill()
	p.mu.Lock()
	n := len(p.ready)
	if n == 0 {
		p.mu.Unlock()
		return nil, false
	}
	pi := p.ready[n-1]
	p.ready = p.ready[:n-1]
	p.mu.Unlock()
	defer pi.img.Close()
	// Never over an existing file.
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(pi.img.Fd())), unix.AT_FDCWD, workspaceImage(dir), unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		if pi.mnt != nil {
			pi.mnt.Close()
		}
		return nil, false
	}
	return pi.mnt, true
}

func pool(k poolKey) *imagePool {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	p := pools[k]
	if p == nil {
		p = &imagePool{key: k}
		pools[k] = p
	}
	return p
}

// refill makes images in the background until poolImages are ready; one
// filler per pool at a time, one mkfs at a time, each within mkfsTimeout.
// A failure (the directory gone, no O_TMPFILE there) stops it until the
// next take. A runs directory that saw one start (a test's, a one-off)
// gets no pool: from the second on it does.
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
		for {
			p.mu.Lock()
			enough := len(p.ready) >= poolImages
			p.mu.Unlock()
			if enough {
				return
			}
			fd, err := unix.Open(p.key.runs, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
			if err != nil {
				return
			}
			f := os.NewFile(uintptr(fd), "workspace-image")
			if err := formatImage(context.Background(), f, p.key.size, p.key.uid, p.key.gid); err != nil {
				f.Close()
				return
			}
			// Unmounted if the kernel refuses: the start mounts it.
			mnt, _ := mountDetached(f)
			p.mu.Lock()
			p.ready = append(p.ready, pooledImage{img: f, mnt: mnt})
			p.mu.Unlock()
		}
	}()
}

// formatImage sizes f, an empty regular file, to size bytes (sparse) and
// makes it a fresh ext4 filesystem whose root is uid:gid's.
func formatImage(ctx context.Context, f *os.File, size uint64, uid, gid int) error {
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
	// mkfs gets the file as its fd 3: an unnamed one has no other path.
	cmd := exec.Command(mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", max(uid, 0), max(gid, 0)), "/proc/self/fd/3")
	cmd.ExtraFiles = []*os.File{f}
	if out, err := bounded.Output(ctx, mkfsTimeout, cmd); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
