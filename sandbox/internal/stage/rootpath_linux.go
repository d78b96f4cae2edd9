package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// rootDir is the directory a sandbox's root is built in. Every path of the
// root is resolved inside it (openat2 RESOLVE_IN_ROOT), one component at a
// time, so that a link in the root — the system directories' and /etc's are
// copies of the host's, absolute ones among them — resolves against the
// root and never leads a mount point, or a directory made for one, onto the
// host (runc's rule since CVE-2021-30465).
type rootDir string

// newRoot is the root every sandbox is built in.
const newRoot rootDir = newRootBase

// rel is p, a path under r, relative to it.
func (r rootDir) rel(p string) (string, error) {
	rel, err := filepath.Rel(string(r), p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not under the root %s", p, string(r))
	}
	return rel, nil
}

// open opens p, a path under r, resolved inside r.
func (r rootDir) open(p string, flags int) (int, error) {
	rel, err := r.rel(p)
	if err != nil {
		return -1, err
	}
	root, err := unix.Open(string(r), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// mountPoint is a mount point in the root, held open: mounting on its
// /proc/self/fd path mounts on exactly what was resolved.
type mountPoint struct{ fd int }

func (m mountPoint) path() string { return "/proc/self/fd/" + strconv.Itoa(m.fd) }
func (m mountPoint) close()       { unix.Close(m.fd) }

// target makes p, a path under r, an empty directory (dir) or file to mount
// on, with its missing parents, each made in a parent resolved inside r.
func (r rootDir) target(p string, dir bool) (mountPoint, error) {
	rel, err := r.rel(p)
	if err != nil {
		return mountPoint{}, err
	}
	parent, err := r.open(string(r), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil || rel == "." {
		return mountPoint{fd: parent}, err
	}
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		last := i == len(parts)-1
		if last && !dir {
			// O_NOFOLLOW: a link already there is resolved below, in r.
			fd, err := unix.Openat(parent, name, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			} else if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EISDIR) {
				unix.Close(parent)
				return mountPoint{}, &os.PathError{Op: "create", Path: filepath.Join(string(r), rel), Err: err}
			}
		} else if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(parent)
			return mountPoint{}, &os.PathError{Op: "mkdir", Path: filepath.Join(string(r), filepath.Join(parts[:i+1]...)), Err: err}
		}
		flags := unix.O_PATH
		if !last || dir {
			flags |= unix.O_DIRECTORY
		}
		next, err := r.open(filepath.Join(string(r), filepath.Join(parts[:i+1]...)), flags)
		unix.Close(parent)
		if err != nil {
			return mountPoint{}, err
		}
		parent = next
	}
	return mountPoint{fd: parent}, nil
}

// symlink makes p, a path under r, a link to to, its parent resolved in r.
func (r rootDir) symlink(to, p string) error {
	parent, err := r.target(filepath.Dir(p), true)
	if err != nil {
		return err
	}
	defer parent.close()
	if err := unix.Symlinkat(to, parent.fd, filepath.Base(p)); err != nil {
		return &os.PathError{Op: "symlink", Path: p, Err: err}
	}
	return nil
}
