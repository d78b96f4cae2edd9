package fstree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxOpenDirs is how many directories of the current path a Writer
// keeps open: a tree deeper than that costs a walk down from the top
// when a name climbs back into it, a few syscalls a level.
const maxOpenDirs = 32

// dirFlags open a directory to work in, never through a link.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// Writer writes names into a directory by descriptors from its top. It
// is not safe for concurrent use.
type Writer struct {
	ctx  context.Context
	o    Options
	top  *os.File // the root's directory
	root int      // its descriptor
	// names are the components of the current directory, from the root;
	// fds[i] is names[:i+1]'s descriptor, open from lo on (only the
	// deepest maxOpenDirs are kept).
	names []string
	fds   []int
	lo    int
	// buf is File's copy buffer, one per Writer: a copy into an
	// *os.File would otherwise take a new 32 KiB buffer per file
	// (os.File.ReadFrom's generic path), a third of a restore's CPU on a
	// tree of thousands of files.
	buf []byte
}

// New returns a Writer into root; ctx stops its walks at each component
// and its copies between blocks. Close it.
func New(ctx context.Context, root *os.Root, o Options) (*Writer, error) {
	top, err := root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the directory to extract into: %w", err)
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	return &Writer{ctx: ctx, o: o, top: top, root: int(top.Fd())}, nil
}

// Close closes the descriptors w holds.
func (w *Writer) Close() {
	w.truncate(0)
	w.top.Close()
}

// CheckName is Clean with w's bounds of a name: at most MaxPath bytes,
// components of at most MaxComponent, at most MaxDepth of them. It
// returns the clean name and its components (none for ".").
func (w *Writer) CheckName(name string) (string, []string, error) {
	return checkName(name, w.o.MaxDepth)
}

// WriteFiles writes files (a name each, to its content) into root with
// mode 0644 as later entries of an archive would be: names are checked
// and bounded as an archive's, missing directories are made, a file or
// link of the same name is replaced (never a directory), and nothing is
// written through a link or a file. Names are written in order, so
// neighbours share the descriptors of their directories.
func WriteFiles(ctx context.Context, root *os.Root, files map[string]string, o Options) error {
	w, err := New(ctx, root, o)
	if err != nil {
		return err
	}
	defer w.Close()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		clean, parts, err := w.CheckName(name)
		if err != nil {
			return err
		}
		if clean == "." {
			return fmt.Errorf("%w: %s names the directory itself", ErrUnsafe, Quote(name))
		}
		c := files[name]
		if _, err := w.File(clean, parts, 0o644, int64(len(c)), time.Time{}, strings.NewReader(c)); err != nil {
			return err
		}
	}
	return nil
}

// errThroughLink and errThroughFile say a directory of a name is not
// one.
var (
	errThroughLink = errors.New("a link")
	errThroughFile = errors.New("a file")
)

// walkError is a directory of a name that could not be entered: the
// first n components of the name.
type walkError struct {
	n   int
	err error
}

func (e *walkError) Error() string { return e.err.Error() }
func (e *walkError) Unwrap() error { return e.err }

// Parent makes (or enters) the directories above the name of parts and
// returns the descriptor of the last, refusing to go through anything
// but a directory. The descriptor is w's: it stays open until w moves.
func (w *Writer) Parent(name string, parts []string) (int, error) {
	fd, err := w.Cd(parts[:len(parts)-1], true)
	var we *walkError
	if errors.As(err, &we) {
		d := strings.Join(parts[:we.n], "/")
		switch {
		case errors.Is(err, errThroughLink):
			return -1, fmt.Errorf("%w: %s goes through the link %s", ErrUnsafe, Quote(name), Quote(d))
		case errors.Is(err, errThroughFile):
			return -1, fmt.Errorf("%w: %s goes through the file %s", ErrUnsafe, Quote(name), Quote(d))
		}
		return -1, w.Fail(d, we.err)
	}
	if err != nil {
		return -1, w.Fail(name, err)
	}
	return fd, nil
}

// Cd makes dir (components from the root) the current directory and
// returns its descriptor: the components it shares with the current one
// cost nothing, each other one an open (and, with create, a mkdir when
// it is missing). The context is checked at each.
func (w *Writer) Cd(dir []string, create bool) (int, error) {
	k := 0
	for k < len(dir) && k < len(w.names) && dir[k] == w.names[k] {
		k++
	}
	w.truncate(k)
	parent, err := w.current()
	if err != nil {
		return -1, err
	}
	for _, c := range dir[k:] {
		if err := w.ctx.Err(); err != nil {
			return -1, err
		}
		fd, err := w.enter(parent, c, create)
		if err != nil {
			return -1, &walkError{len(w.names) + 1, err}
		}
		w.names, w.fds = append(w.names, c), append(w.fds, fd)
		for len(w.fds)-w.lo > maxOpenDirs {
			unix.Close(w.fds[w.lo])
			w.fds[w.lo] = -1
			w.lo++
		}
		parent = fd
	}
	return parent, nil
}

// current returns the descriptor of the current directory, opening it
// again from the root when it was closed to keep few open.
func (w *Writer) current() (int, error) {
	n := len(w.names)
	switch {
	case n == 0:
		return w.root, nil
	case w.lo < n:
		return w.fds[n-1], nil
	}
	names := slices.Clone(w.names)
	w.names, w.fds, w.lo = w.names[:0], w.fds[:0], 0
	return w.Cd(names, false)
}

// truncate closes the current path's directories past its first k.
func (w *Writer) truncate(k int) {
	for i := max(k, w.lo); i < len(w.fds); i++ {
		unix.Close(w.fds[i])
	}
	w.names, w.fds, w.lo = w.names[:k], w.fds[:k], min(w.lo, k)
}

// enter opens the directory c of parent, making it first if it is
// missing and create is set.
func (w *Writer) enter(parent int, c string, create bool) (int, error) {
	fd, err := openat(parent, c, dirFlags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(parent, c, 0o755); err == nil {
			err = w.Chown(parent, c)
		}
		if err == nil {
			fd, err = openat(parent, c, dirFlags, 0)
		}
	}
	if errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Fstatat(parent, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, errThroughLink
		}
		return -1, errThroughFile
	}
	return fd, err
}

// openat is openat(2) tried again when a signal interrupts it.
func openat(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Create makes leaf in parent with mk; when something is there already,
// it is cleared first, so the later name wins as tar has it: a
// directory is never replaced.
func (w *Writer) Create(parent int, name, leaf string, mk func() error) error {
	err := mk()
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("%w: %s is a directory and, later, not one", ErrUnsafe, Quote(name))
	}
	if err := unix.Unlinkat(parent, leaf, 0); err != nil {
		return err
	}
	return mk()
}

// File writes the first size bytes of r as the file name (parts its
// components) with mode perm, replacing a file or link of that name,
// and sets its modification time to mtime unless it is zero. It returns
// the bytes written; r ending before size fails with io.ErrUnexpectedEOF
// and an error of r's is wrapped as it is, for the caller to tell apart.
func (w *Writer) File(name string, parts []string, perm os.FileMode, size int64, mtime time.Time, r io.Reader) (int64, error) {
	parent, err := w.Parent(name, parts)
	if err != nil {
		return 0, err
	}
	leaf := parts[len(parts)-1]
	var fd int
	err = w.Create(parent, name, leaf, func() (err error) {
		fd, err = openat(parent, leaf, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return 0, w.Fail(name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if w.buf == nil {
		w.buf = make([]byte, 256<<10)
	}
	// The struct hides f's ReadFrom, so the copy goes through buf.
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, &ctxReader{ctx: w.ctx, r: io.LimitReader(r, size)}, w.buf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && w.o.Chown {
		err = f.Chown(w.o.UID, w.o.GID)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !mtime.IsZero() {
		// Build tools compare modification times.
		ts := unix.NsecToTimespec(mtime.UnixNano())
		err = unix.UtimesNanoAt(parent, leaf, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return n, w.Fail(name, err)
	}
	return n, nil
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Chown gives leaf of parent, just made, to the sandbox ids.
func (w *Writer) Chown(parent int, leaf string) error {
	if !w.o.Chown {
		return nil
	}
	return unix.Fchownat(parent, leaf, w.o.UID, w.o.GID, unix.AT_SYMLINK_NOFOLLOW)
}

// Fail wraps a filesystem error about name; a full disk is a limit.
func (w *Writer) Fail(name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: no space left for %s (the run's disk limit)", ErrLimit, Quote(name))
	}
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return fmt.Errorf("%w: the name %s is too long", ErrCorrupt, Quote(name))
	}
	if errors.Is(err, ErrLimit) || errors.Is(err, ErrUnsafe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("extract %s: %w", Quote(name), err)
}
