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
	"path"
	"strings"
	"syscall"
)

// Errors an extraction wraps; the message names the entry and the reason.
var (
	// ErrUnsafe: an entry would write outside the directory, through a
	// link, or make a link out, a device or a FIFO.
	ErrUnsafe = errors.New("unsafe archive")
	// ErrLimit: the archive is over a limit (bytes, entries, the disk).
	ErrLimit = errors.New("archive over a limit")
	// ErrCorrupt: the archive is not a readable tar or gzip.
	ErrCorrupt = errors.New("corrupt archive")
)

// Defaults of Limits.
const (
	DefaultMaxBytes = 1 << 30
	// DefaultMaxEntries is as many as a run's outputs capture lists, so a
	// seeded workspace can always be diffed.
	DefaultMaxEntries = 200_000
	// headerAllowance is the uncompressed stream each entry may use besides
	// its content: its header blocks, long-name records and padding.
	headerAllowance = 8 << 10
	// maxLinkHops bounds the links one resolution follows, as the kernel's
	// ELOOP does.
	maxLinkHops = 40
	// maxPath is the longest path (and link target) Linux takes.
	maxPath = 4095
	// linkBudget bounds the bytes of paths looked up while checking an
	// archive's links: thousands of ordinary links cost kilobytes, while
	// links made to cost a resolution each of 40 hops of 2,000 segments
	// stop here instead of taking the worker's time.
	linkBudget = 256 << 20
)

// Limits bound one extraction.
type Limits struct {
	// MaxBytes bounds the archive as read and the sum of its files' sizes
	// (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxEntries bounds the entries (0: DefaultMaxEntries).
	MaxEntries int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// Options of Extract.
type Options struct {
	Limits
	// Chown gives what is extracted to UID and GID (a root worker's
	// sandbox ids); else it is the caller's.
	Chown    bool
	UID, GID int
}

// Stats describe an extraction.
type Stats struct {
	Entries int
	// Bytes is the files' total size; Read the archive's bytes as read.
	Bytes, Read int64
	// SHA256 is the digest of the archive's bytes as read (all of them,
	// past the tar's end too).
	SHA256 [sha256.Size]byte
}

// Extract reads the tar (or gzipped tar) r into root. ctx stops it between
// entries and between blocks of a file.
func Extract(ctx context.Context, r io.Reader, root *os.Root, o Options) (Stats, error) {
	o.Limits = o.Limits.withDefaults()
	sum := sha256.New()
	raw := &counter{r: io.TeeReader(r, sum), max: o.MaxBytes, what: "the archive"}
	x := &extractor{ctx: ctx, root: root, o: o, kinds: map[string]kind{}, links: map[string]string{}, linkBudget: linkBudget}
	err := x.run(raw)
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

type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindLink
)

type extractor struct {
	ctx     context.Context
	root    *os.Root
	o       Options
	kinds   map[string]kind   // every path made, by clean name
	links   map[string]string // symbolic link → target
	dirs    []dirMode         // modes set once every entry is in
	entries int
	bytes   int64
	// linkBudget is what is left of the bytes resolve may look up.
	linkBudget int
}

type dirMode struct {
	name string
	mode os.FileMode
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
		if err := x.root.Chmod(x.dirs[i].name, x.dirs[i].mode); err != nil {
			return fmt.Errorf("%s: %w", quote(x.dirs[i].name), err)
		}
	}
	// Read the gzip stream to its end: its checksum is checked there.
	if _, err := io.Copy(io.Discard, un); err != nil {
		return fmt.Errorf("%w: after the tar's end: %v", ErrCorrupt, readErr(err))
	}
	return nil
}

// readErr keeps a limit's error as it is and makes EOF say "truncated".
func readErr(err error) error {
	if errors.Is(err, ErrLimit) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated")
	}
	return err
}

func (x *extractor) entry(hdr *tar.Header, tr io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX defaults for later entries, already applied by the reader
	}
	x.entries++
	if x.entries > x.o.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrLimit, x.o.MaxEntries)
	}
	name, err := Clean(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		return nil // the directory itself
	}
	if err := x.parents(name); err != nil {
		return err
	}
	perm := os.FileMode(hdr.Mode) & os.ModePerm // setuid, setgid and sticky cleared
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(name, perm)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		return x.file(name, perm, hdr, tr)
	case tar.TypeSymlink:
		return x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("%w: %s is a device", ErrUnsafe, quote(name))
	case tar.TypeFifo:
		return fmt.Errorf("%w: %s is a FIFO", ErrUnsafe, quote(name))
	}
	return fmt.Errorf("%w: %s has the unsupported tar type %q", ErrUnsafe, quote(name), hdr.Typeflag)
}

// Clean checks an archive's name and returns it clean and relative
// ("." for the directory itself): an absolute name, one with a ".."
// component or a NUL is refused.
func Clean(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: %s has a NUL byte", ErrUnsafe, quote(name))
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %s is absolute", ErrUnsafe, quote(name))
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %s climbs out with ..", ErrUnsafe, quote(name))
		}
	}
	return path.Clean(name), nil
}

// parents makes the missing directories above name, refusing to go
// through anything but a directory the archive made.
func (x *extractor) parents(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		d := name[:i]
		switch x.kinds[d] {
		case kindDir:
			continue
		case kindLink:
			return fmt.Errorf("%w: %s goes through the link %s", ErrUnsafe, quote(name), quote(d))
		case kindFile:
			return fmt.Errorf("%w: %s goes through the file %s", ErrUnsafe, quote(name), quote(d))
		}
		if err := x.mkdir(d); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) mkdir(name string) error {
	if err := x.root.Mkdir(name, 0o755); err != nil {
		return x.fail(name, err)
	}
	x.kinds[name] = kindDir
	return x.chown(name)
}

func (x *extractor) dir(name string, perm os.FileMode) error {
	switch x.kinds[name] {
	case 0:
		if err := x.mkdir(name); err != nil {
			return err
		}
	case kindDir:
	default:
		return fmt.Errorf("%w: %s is a directory and, earlier, not one", ErrUnsafe, quote(name))
	}
	// Writable by its owner until every entry is in.
	x.dirs = append(x.dirs, dirMode{name, perm})
	return nil
}

// replace clears what an earlier entry of the same name made, so the later
// one wins as tar has it; a directory is never replaced.
func (x *extractor) replace(name string) error {
	switch x.kinds[name] {
	case 0:
		return nil
	case kindDir:
		return fmt.Errorf("%w: %s is a directory and, later, not one", ErrUnsafe, quote(name))
	}
	delete(x.links, name)
	delete(x.kinds, name)
	if err := x.root.Remove(name); err != nil {
		return x.fail(name, err)
	}
	return nil
}

func (x *extractor) file(name string, perm os.FileMode, hdr *tar.Header, tr io.Reader) error {
	if hdr.Size < 0 || hdr.Size > x.o.MaxBytes-x.bytes {
		return fmt.Errorf("%w: the files are larger than %d bytes (at %s)", ErrLimit, x.o.MaxBytes, quote(name))
	}
	if err := x.replace(name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return x.fail(name, err)
	}
	x.kinds[name] = kindFile
	n, err := io.Copy(f, &ctxReader{ctx: x.ctx, r: io.LimitReader(tr, hdr.Size)})
	x.bytes += n
	if err == nil && n != hdr.Size {
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
	if err == nil && !hdr.ModTime.IsZero() {
		// Build tools compare modification times.
		err = x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
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

func (x *extractor) symlink(name, target string) error {
	switch {
	case target == "":
		return fmt.Errorf("%w: the link %s has no target", ErrUnsafe, quote(name))
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("%w: the link %s points out, to %s", ErrUnsafe, quote(name), quote(target))
	case strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("%w: the link %s has a NUL byte", ErrUnsafe, quote(name))
	case len(target) > maxPath:
		return fmt.Errorf("%w: the link %s has a target longer than %d bytes", ErrUnsafe, quote(name), maxPath)
	}
	if err := x.replace(name); err != nil {
		return err
	}
	if err := x.root.Symlink(target, name); err != nil {
		return x.fail(name, err)
	}
	x.kinds[name], x.links[name] = kindLink, target
	return x.chown(name)
}

func (x *extractor) hardlink(name, target string) error {
	old, err := Clean(target)
	if err != nil {
		return fmt.Errorf("the hard link %s: %w", quote(name), err)
	}
	if x.kinds[old] != kindFile {
		return fmt.Errorf("%w: the hard link %s is not to a file earlier in the archive (%s)", ErrUnsafe, quote(name), quote(target))
	}
	if old == name {
		return nil
	}
	if err := x.replace(name); err != nil {
		return err
	}
	if err := x.root.Link(old, name); err != nil {
		return x.fail(name, err)
	}
	x.kinds[name] = kindFile
	return nil
}

// checkLinks refuses the archive if a link, resolved through the others
// (a later entry may make an earlier link's path climb), leads out.
func (x *extractor) checkLinks() error {
	for name := range x.links {
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
		if len(cur) > maxPath {
			return fmt.Errorf("%w: the link %s resolves to a path longer than %d bytes", ErrUnsafe, quote(name), maxPath)
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

func (x *extractor) chown(name string) error {
	if !x.o.Chown {
		return nil
	}
	if err := x.root.Lchown(name, x.o.UID, x.o.GID); err != nil {
		return x.fail(name, err)
	}
	return nil
}

// fail wraps a filesystem error; a full disk is a limit.
func (x *extractor) fail(name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: no space left for %s (the run's disk limit)", ErrLimit, quote(name))
	}
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return fmt.Errorf("%w: the name %s is too long", ErrCorrupt, quote(name))
	}
	if errors.Is(err, ErrLimit) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("extract %s: %w", quote(name), err)
}

// quote shows a name of any bytes on one line.
func quote(s string) string { return fmt.Sprintf("%q", s) }

// counter counts what is read through it and fails past max.
type counter struct {
	r    io.Reader
	n    int64
	max  int64
	what string
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, fmt.Errorf("%w: %s is larger than %d bytes", ErrLimit, c.what, c.max)
	}
	return n, err
}

// ctxReader stops a long copy when ctx ends and marks the archive's
// errors apart from the disk's.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readError{err}
	}
	return n, err
}

// readError is a failure reading the archive, as opposed to writing the
// tree.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
