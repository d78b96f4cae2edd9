package unpack

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
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

// Extract reads the tar (or gzipped tar) r into root, which should be
// empty: the tree on disk is what the archive made. ctx stops it between
// entries, between the components of a name and between blocks of a
// file.
func Extract(ctx context.Context, r io.Reader, root *os.Root, o Options) (Stats, error) {
	sum := sha256.New()
	raw := &counter{r: io.TeeReader(r, sum), max: o.withDefaults().MaxBytes, what: "the archive"}
	x, err := newExtractor(ctx, root, o)
	if err != nil {
		return Stats{}, err
	}
	defer x.close()
	err = x.run(raw)
	st := Stats{Entries: x.entries, Bytes: x.bytes, Read: raw.n}
	if err == nil {
		// The digest covers the whole object, whatever follows the tar.
		if _, err = io.Copy(io.Discard, raw); err != nil {
			err = readErr(err)
		}
	}
	copy(st.SHA256[:], sum.Sum(nil))
	return st, err
}

// WriteFiles writes files (a name each, to its content) into root with
// mode 0644 as later entries of an archive would be: names are checked
// and bounded as an archive's, missing directories are made, a file or
// link of the same name is replaced (never a directory), and nothing is
// written through a link or a file. Names are written in order, so
// neighbours share the descriptors of their directories.
func WriteFiles(ctx context.Context, root *os.Root, files map[string]string, o Options) error {
	x, err := newExtractor(ctx, root, o)
	if err != nil {
		return err
	}
	defer x.close()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		clean, parts, err := checkName(name, x.o.MaxDepth)
		if err != nil {
			return err
		}
		if clean == "." {
			return fmt.Errorf("%w: %s names the directory itself", ErrUnsafe, quote(name))
		}
		c := files[name]
		if err := x.file(clean, parts, 0o644, int64(len(c)), time.Time{}, strings.NewReader(c)); err != nil {
			return err
		}
	}
	return nil
}

// maxOpenDirs is how many directories of the current path an extraction
// keeps open: a tree deeper than that costs a walk down from the top
// when an entry climbs back into it, a few syscalls a level.
const maxOpenDirs = 32

// dirFlags open a directory to work in, never through a link.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

type extractor struct {
	ctx  context.Context
	o    Options
	top  *os.File // the root's directory
	root int      // its descriptor
	// names are the components of the directory entries are made in,
	// from the root; fds[i] is names[:i+1]'s descriptor, open from lo on
	// (only the deepest maxOpenDirs are kept).
	names []string
	fds   []int
	lo    int

	links   map[string]string // symbolic link → target
	dirs    []dirMode         // modes set once every entry is in
	entries int
	bytes   int64
	// headers is the bytes of names, link names and PAX records read,
	// counted with the files' against MaxBytes.
	headers int64
	// linkBudget is what is left of the bytes resolve may look up.
	linkBudget int
}

type dirMode struct {
	name string
	mode os.FileMode
}

func newExtractor(ctx context.Context, root *os.Root, o Options) (*extractor, error) {
	top, err := root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the directory to extract into: %w", err)
	}
	o.Limits = o.Limits.withDefaults()
	return &extractor{ctx: ctx, o: o, top: top, root: int(top.Fd()), links: map[string]string{}, linkBudget: linkBudget}, nil
}

func (x *extractor) close() {
	x.truncate(0)
	x.top.Close()
}

func (x *extractor) run(raw io.Reader) error {
	br := bufio.NewReaderSize(raw, 64<<10)
	magic, _ := br.Peek(6)
	var stream io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: gzip: %v", ErrCorrupt, readErr(err))
		}
		stream = gz
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return fmt.Errorf("%w: zstd is not supported; use a tar or a gzipped tar", ErrCorrupt)
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return fmt.Errorf("%w: xz is not supported; use a tar or a gzipped tar", ErrCorrupt)
	case bytes.HasPrefix(magic, []byte("BZh")):
		return fmt.Errorf("%w: bzip2 is not supported; use a tar or a gzipped tar", ErrCorrupt)
	}
	// The uncompressed stream is bounded too: a gzip bomb of empty entries
	// or of padding stops here.
	un := &counter{r: stream, max: x.o.MaxBytes + int64(x.o.MaxEntries)*headerAllowance, what: "the uncompressed archive"}
	tr := tar.NewReader(un)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: tar: %v", ErrCorrupt, readErr(err))
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	if err := x.checkLinks(); err != nil {
		return err
	}
	// Deepest last in, first set: a directory made read-only after its
	// children are in.
	for i := len(x.dirs) - 1; i >= 0; i-- {
		fd, err := x.cd(strings.Split(x.dirs[i].name, "/"), false)
		if err == nil {
			err = unix.Fchmod(fd, uint32(x.dirs[i].mode))
		}
		if err != nil {
			return x.fail(x.dirs[i].name, err)
		}
	}
	// Read the gzip stream to its end: its checksum is checked there.
	if _, err := io.Copy(io.Discard, un); err != nil {
		return fmt.Errorf("%w: after the tar's end: %v", ErrCorrupt, readErr(err))
	}
	return nil
}

// charge counts hdr's names and records against MaxBytes: they are the
// one part of an entry its size does not say.
func (x *extractor) charge(hdr *tar.Header) error {
	n := len(hdr.Name) + len(hdr.Linkname)
	for k, v := range hdr.PAXRecords {
		if k != "path" && k != "linkpath" { // hdr's names already
			n += len(k) + len(v)
		}
	}
	if x.headers += int64(n); x.bytes+x.headers > x.o.MaxBytes {
		return fmt.Errorf("%w: the files and their names are larger than %d bytes (at %s)", ErrLimit, x.o.MaxBytes, quote(hdr.Name))
	}
	return nil
}

func (x *extractor) entry(hdr *tar.Header, tr io.Reader) error {
	if err := x.charge(hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX defaults for later entries, already applied by the reader
	}
	x.entries++
	if x.entries > x.o.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrLimit, x.o.MaxEntries)
	}
	name, parts, err := checkName(hdr.Name, x.o.MaxDepth)
	if err != nil {
		return err
	}
	if name == "." {
		return nil // the directory itself
	}
	perm := os.FileMode(hdr.Mode) & os.ModePerm // setuid, setgid and sticky cleared
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(name, parts, perm)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		return x.file(name, parts, perm, hdr.Size, hdr.ModTime, tr)
	case tar.TypeSymlink:
		return x.symlink(name, parts, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, parts, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("%w: %s is a device", ErrUnsafe, quote(name))
	case tar.TypeFifo:
		return fmt.Errorf("%w: %s is a FIFO", ErrUnsafe, quote(name))
	}
	return fmt.Errorf("%w: %s has the unsupported tar type %q", ErrUnsafe, quote(name), hdr.Typeflag)
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

// parent makes (or enters) the directories above the name of parts and
// returns the descriptor of the last, refusing to go through anything
// but a directory.
func (x *extractor) parent(name string, parts []string) (int, error) {
	fd, err := x.cd(parts[:len(parts)-1], true)
	var we *walkError
	if errors.As(err, &we) {
		d := strings.Join(parts[:we.n], "/")
		switch {
		case errors.Is(err, errThroughLink):
			return -1, fmt.Errorf("%w: %s goes through the link %s", ErrUnsafe, quote(name), quote(d))
		case errors.Is(err, errThroughFile):
			return -1, fmt.Errorf("%w: %s goes through the file %s", ErrUnsafe, quote(name), quote(d))
		}
		return -1, x.fail(d, we.err)
	}
	if err != nil {
		return -1, x.fail(name, err)
	}
	return fd, nil
}

// cd makes dir (components from the root) the current directory and
// returns its descriptor: the components it shares with the current one
// cost nothing, each other one an open (and, with create, a mkdir when
// it is missing). The context is checked at each.
func (x *extractor) cd(dir []string, create bool) (int, error) {
	k := 0
	for k < len(dir) && k < len(x.names) && dir[k] == x.names[k] {
		k++
	}
	x.truncate(k)
	parent, err := x.current()
	if err != nil {
		return -1, err
	}
	for _, c := range dir[k:] {
		if err := x.ctx.Err(); err != nil {
			return -1, err
		}
		fd, err := x.enter(parent, c, create)
		if err != nil {
			return -1, &walkError{len(x.names) + 1, err}
		}
		x.names, x.fds = append(x.names, c), append(x.fds, fd)
		for len(x.fds)-x.lo > maxOpenDirs {
			unix.Close(x.fds[x.lo])
			x.fds[x.lo] = -1
			x.lo++
		}
		parent = fd
	}
	return parent, nil
}

// current returns the descriptor of the current directory, opening it
// again from the root when it was closed to keep few open.
func (x *extractor) current() (int, error) {
	n := len(x.names)
	switch {
	case n == 0:
		return x.root, nil
	case x.lo < n:
		return x.fds[n-1], nil
	}
	names := slices.Clone(x.names)
	x.names, x.fds, x.lo = x.names[:0], x.fds[:0], 0
	return x.cd(names, false)
}

// truncate closes the current path's directories past its first k.
func (x *extractor) truncate(k int) {
	for i := max(k, x.lo); i < len(x.fds); i++ {
		unix.Close(x.fds[i])
	}
	x.names, x.fds, x.lo = x.names[:k], x.fds[:k], min(x.lo, k)
}

// enter opens the directory c of parent, making it first if it is
// missing and create is set.
func (x *extractor) enter(parent int, c string, create bool) (int, error) {
	fd, err := openat(parent, c, dirFlags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(parent, c, 0o755); err == nil {
			err = x.chown(parent, c)
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

func (x *extractor) dir(name string, parts []string, perm os.FileMode) error {
	parent, err := x.parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	switch err := unix.Mkdirat(parent, leaf, 0o755); {
	case err == nil:
		if err := x.chown(parent, leaf); err != nil {
			return x.fail(name, err)
		}
	case errors.Is(err, unix.EEXIST):
		var st unix.Stat_t
		if err := unix.Fstatat(parent, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.fail(name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("%w: %s is a directory and, earlier, not one", ErrUnsafe, quote(name))
		}
	default:
		return x.fail(name, err)
	}
	// Writable by its owner until every entry is in.
	x.dirs = append(x.dirs, dirMode{name, perm})
	return nil
}

// create makes leaf in parent with mk; when something is there already,
// it is cleared first, so the later entry wins as tar has it: a
// directory is never replaced.
func (x *extractor) create(parent int, name, leaf string, mk func() error) error {
	err := mk()
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("%w: %s is a directory and, later, not one", ErrUnsafe, quote(name))
	}
	delete(x.links, name)
	if err := unix.Unlinkat(parent, leaf, 0); err != nil {
		return err
	}
	return mk()
}

func (x *extractor) file(name string, parts []string, perm os.FileMode, size int64, mtime time.Time, r io.Reader) error {
	if size < 0 || size > x.o.MaxBytes-x.bytes-x.headers {
		return fmt.Errorf("%w: the files and their names are larger than %d bytes (at %s)", ErrLimit, x.o.MaxBytes, quote(name))
	}
	parent, err := x.parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	var fd int
	err = x.create(parent, name, leaf, func() (err error) {
		fd, err = openat(parent, leaf, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return x.fail(name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	n, err := io.Copy(f, &ctxReader{ctx: x.ctx, r: io.LimitReader(r, size)})
	x.bytes += n
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && x.o.Chown {
		err = f.Chown(x.o.UID, x.o.GID)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !mtime.IsZero() {
		// Build tools compare modification times.
		ts := unix.NsecToTimespec(mtime.UnixNano())
		err = unix.UtimesNanoAt(parent, leaf, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	var re *readError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: tar: %s truncated", ErrCorrupt, quote(name))
	case errors.As(err, &re) && !errors.Is(err, ErrLimit) && x.ctx.Err() == nil:
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, quote(name), readErr(re.err))
	}
	return x.fail(name, err)
}

func (x *extractor) symlink(name string, parts []string, target string) error {
	switch {
	case target == "":
		return fmt.Errorf("%w: the link %s has no target", ErrUnsafe, quote(name))
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("%w: the link %s points out, to %s", ErrUnsafe, quote(name), quote(target))
	case strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("%w: the link %s has a NUL byte", ErrUnsafe, quote(name))
	case len(target) > MaxPath:
		return fmt.Errorf("%w: the link %s has a target longer than %d bytes", ErrUnsafe, quote(name), MaxPath)
	}
	parent, err := x.parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	if err := x.create(parent, name, leaf, func() error { return unix.Symlinkat(target, parent, leaf) }); err != nil {
		return x.fail(name, err)
	}
	x.links[name] = target
	if err := x.chown(parent, leaf); err != nil {
		return x.fail(name, err)
	}
	return nil
}

func (x *extractor) hardlink(name string, parts []string, target string) error {
	old, oldParts, err := checkName(target, x.o.MaxDepth)
	if err != nil {
		return fmt.Errorf("the hard link %s: %w", quote(name), err)
	}
	notFile := fmt.Errorf("%w: the hard link %s is not to a file earlier in the archive (%s)", ErrUnsafe, quote(name), quote(target))
	if old == "." {
		return notFile
	}
	// The old file's directory, held while the new one's is entered.
	oldDir, err := x.cd(oldParts[:len(oldParts)-1], false)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return notFile
	}
	oldLeaf := oldParts[len(oldParts)-1]
	var st unix.Stat_t
	if err := unix.Fstatat(oldDir, oldLeaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notFile
	}
	if old == name {
		return nil
	}
	oldDir, err = unix.FcntlInt(uintptr(oldDir), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return x.fail(name, err)
	}
	defer unix.Close(oldDir)
	parent, err := x.parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	if err := x.create(parent, name, leaf, func() error { return unix.Linkat(oldDir, oldLeaf, parent, leaf, 0) }); err != nil {
		return x.fail(name, err)
	}
	return nil
}

// checkLinks refuses the archive if a link, resolved through the others
// (a later entry may make an earlier link's path climb), leads out.
func (x *extractor) checkLinks() error {
	for name := range x.links {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		if err := x.resolve(name); err != nil {
			return err
		}
	}
	return nil
}

// resolve follows the link name the way the kernel would through the
// archive's tree and fails when it leaves the directory or loops. It
// costs a step per path segment, taken from the archive's budget.
func (x *extractor) resolve(name string) error {
	// cur is where we are, from the top; starts[i] is where its i-th
	// segment starts.
	var cur []byte
	var starts []int
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		for seg := range strings.SplitSeq(name[:i], "/") {
			starts, cur = push(starts, cur, seg)
		}
	}
	todo := strings.Split(x.links[name], "/")
	for hops := 0; len(todo) > 0; {
		seg := todo[0]
		todo = todo[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(starts) == 0 {
				return fmt.Errorf("%w: the link %s points out of the workspace", ErrUnsafe, quote(name))
			}
			cur, starts = cur[:max(starts[len(starts)-1]-1, 0)], starts[:len(starts)-1]
			continue
		}
		starts, cur = push(starts, cur, seg)
		if x.linkBudget -= len(cur); x.linkBudget < 0 {
			return fmt.Errorf("%w: its links are too intricate to check (at %s)", ErrLimit, quote(name))
		}
		if len(cur) > MaxPath {
			return fmt.Errorf("%w: the link %s resolves to a path longer than %d bytes", ErrUnsafe, quote(name), MaxPath)
		}
		target, isLink := x.links[string(cur)]
		if !isLink {
			continue
		}
		cur, starts = cur[:max(starts[len(starts)-1]-1, 0)], starts[:len(starts)-1]
		if hops++; hops > maxLinkHops {
			return fmt.Errorf("%w: the link %s loops", ErrUnsafe, quote(name))
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return nil
}

// push appends the segment seg to the path cur.
func push(starts []int, cur []byte, seg string) ([]int, []byte) {
	if len(cur) > 0 {
		cur = append(cur, '/')
	}
	return append(starts, len(cur)), append(cur, seg...)
}

// chown gives leaf of parent, just made, to the sandbox ids.
func (x *extractor) chown(parent int, leaf string) error {
	if !x.o.Chown {
		return nil
	}
	return unix.Fchownat(parent, leaf, x.o.UID, x.o.GID, unix.AT_SYMLINK_NOFOLLOW)
}

// fail wraps a filesystem error; a full disk is a limit.
func (x *extractor) fail(name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: no space left for %s (the run's disk limit)", ErrLimit, quote(name))
	}
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return fmt.Errorf("%w: the name %s is too long", ErrCorrupt, quote(name))
	}
	if errors.Is(err, ErrLimit) || errors.Is(err, ErrUnsafe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("extract %s: %w", quote(name), err)
}
