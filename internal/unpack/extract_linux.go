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
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/fstree"
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
	defer x.Close()
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

// extractor is a Writer that knows the archive: its links, its
// directories' modes and what it has used of the limits.
type extractor struct {
	*fstree.Writer
	ctx context.Context
	o   Options

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
	o.Limits = o.Limits.withDefaults()
	w, err := fstree.New(ctx, root, fstree.Options{MaxDepth: o.MaxDepth, Chown: o.Chown, UID: o.UID, GID: o.GID})
	if err != nil {
		return nil, err
	}
	return &extractor{Writer: w, ctx: ctx, o: o, links: map[string]string{}, linkBudget: linkBudget}, nil
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
		fd, err := x.Cd(strings.Split(x.dirs[i].name, "/"), false)
		if err == nil {
			err = unix.Fchmod(fd, uint32(x.dirs[i].mode))
		}
		if err != nil {
			return x.Fail(x.dirs[i].name, err)
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
		return fmt.Errorf("%w: the files and their names are larger than %d bytes (at %s)", ErrLimit, x.o.MaxBytes, fstree.Quote(hdr.Name))
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
	name, parts, err := x.CheckName(hdr.Name)
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
		return fmt.Errorf("%w: %s is a device", ErrUnsafe, fstree.Quote(name))
	case tar.TypeFifo:
		return fmt.Errorf("%w: %s is a FIFO", ErrUnsafe, fstree.Quote(name))
	}
	return fmt.Errorf("%w: %s has the unsupported tar type %q", ErrUnsafe, fstree.Quote(name), hdr.Typeflag)
}

func (x *extractor) dir(name string, parts []string, perm os.FileMode) error {
	parent, err := x.Parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	switch err := unix.Mkdirat(parent, leaf, 0o755); {
	case err == nil:
		if err := x.Chown(parent, leaf); err != nil {
			return x.Fail(name, err)
		}
	case errors.Is(err, unix.EEXIST):
		var st unix.Stat_t
		if err := unix.Fstatat(parent, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.Fail(name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("%w: %s is a directory and, earlier, not one", ErrUnsafe, fstree.Quote(name))
		}
	default:
		return x.Fail(name, err)
	}
	// Writable by its owner until every entry is in.
	x.dirs = append(x.dirs, dirMode{name, perm})
	return nil
}

func (x *extractor) file(name string, parts []string, perm os.FileMode, size int64, mtime time.Time, r io.Reader) error {
	if size < 0 || size > x.o.MaxBytes-x.bytes-x.headers {
		return fmt.Errorf("%w: the files and their names are larger than %d bytes (at %s)", ErrLimit, x.o.MaxBytes, fstree.Quote(name))
	}
	x.replace(name)
	n, err := x.File(name, parts, perm, size, mtime, &sourceReader{r})
	x.bytes += n
	var re *readError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: tar: %s truncated", ErrCorrupt, fstree.Quote(name))
	case errors.As(err, &re) && !errors.Is(err, ErrLimit) && x.ctx.Err() == nil:
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, fstree.Quote(name), readErr(re.err))
	}
	return err
}

func (x *extractor) symlink(name string, parts []string, target string) error {
	switch {
	case target == "":
		return fmt.Errorf("%w: the link %s has no target", ErrUnsafe, fstree.Quote(name))
	case strings.HasPrefix(target, "/") && !x.o.LinksAsIs:
		return fmt.Errorf("%w: the link %s points out, to %s", ErrUnsafe, fstree.Quote(name), fstree.Quote(target))
	case strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("%w: the link %s has a NUL byte", ErrUnsafe, fstree.Quote(name))
	case len(target) > fstree.MaxPath:
		return fmt.Errorf("%w: the link %s has a target longer than %d bytes", ErrUnsafe, fstree.Quote(name), fstree.MaxPath)
	}
	parent, err := x.Parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	x.replace(name)
	if err := x.Create(parent, name, leaf, func() error { return unix.Symlinkat(target, parent, leaf) }); err != nil {
		return x.Fail(name, err)
	}
	if !x.o.LinksAsIs {
		x.links[name] = target // checked once every entry is in
	}
	if err := x.Chown(parent, leaf); err != nil {
		return x.Fail(name, err)
	}
	return nil
}

func (x *extractor) hardlink(name string, parts []string, target string) error {
	old, oldParts, err := x.CheckName(target)
	if err != nil {
		return fmt.Errorf("the hard link %s: %w", fstree.Quote(name), err)
	}
	notFile := fmt.Errorf("%w: the hard link %s is not to a file earlier in the archive (%s)", ErrUnsafe, fstree.Quote(name), fstree.Quote(target))
	if old == "." {
		return notFile
	}
	// The old file's directory, held while the new one's is entered.
	oldDir, err := x.Cd(oldParts[:len(oldParts)-1], false)
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
		return x.Fail(name, err)
	}
	defer unix.Close(oldDir)
	parent, err := x.Parent(name, parts)
	if err != nil {
		return err
	}
	leaf := parts[len(parts)-1]
	x.replace(name)
	if err := x.Create(parent, name, leaf, func() error { return unix.Linkat(oldDir, oldLeaf, parent, leaf, 0) }); err != nil {
		return x.Fail(name, err)
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
				return fmt.Errorf("%w: the link %s points out of the workspace", ErrUnsafe, fstree.Quote(name))
			}
			cur, starts = cur[:max(starts[len(starts)-1]-1, 0)], starts[:len(starts)-1]
			continue
		}
		starts, cur = push(starts, cur, seg)
		if x.linkBudget -= len(cur); x.linkBudget < 0 {
			return fmt.Errorf("%w: its links are too intricate to check (at %s)", ErrLimit, fstree.Quote(name))
		}
		if len(cur) > fstree.MaxPath {
			return fmt.Errorf("%w: the link %s resolves to a path longer than %d bytes", ErrUnsafe, fstree.Quote(name), fstree.MaxPath)
		}
		target, isLink := x.links[string(cur)]
		if !isLink {
			continue
		}
		cur, starts = cur[:max(starts[len(starts)-1]-1, 0)], starts[:len(starts)-1]
		if hops++; hops > maxLinkHops {
			return fmt.Errorf("%w: the link %s loops", ErrUnsafe, fstree.Quote(name))
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

// replace forgets the link name before an entry takes its place: a
// failed one ends the extraction, so the link is gone whenever it is
// (the Writer's Create replaces a link or file, never a directory).
func (x *extractor) replace(name string) {
	delete(x.links, name)
}
