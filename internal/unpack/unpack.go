package unpack

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/internal/fstree"
)

// Errors an extraction wraps; the message names the entry and the reason.
// They are fstree's, so an error of the tree's writer and one of the
// archive's are checked alike.
var (
	// ErrUnsafe: an entry would write outside the directory, through a
	// link, or make a link out, a device or a FIFO.
	ErrUnsafe = fstree.ErrUnsafe
	// ErrLimit: the archive is over a limit (bytes, entries, a name's
	// length or depth, the disk).
	ErrLimit = fstree.ErrLimit
	// ErrCorrupt: the archive is not a readable tar or gzip.
	ErrCorrupt = fstree.ErrCorrupt
)

// Defaults of Limits.
const (
	DefaultMaxBytes = 1 << 30
	// DefaultMaxEntries is as many as a run's outputs capture lists, so a
	// seeded workspace can always be diffed.
	DefaultMaxEntries = 200_000
	// DefaultMaxDepth bounds the components of a name.
	DefaultMaxDepth = fstree.DefaultMaxDepth
	// headerAllowance is the uncompressed stream each entry may use besides
	// its content: its header blocks, long-name records and padding.
	headerAllowance = 8 << 10
	// maxLinkHops bounds the links one resolution follows, as the kernel's
	// ELOOP does.
	maxLinkHops = 40
	// linkBudget bounds the bytes of paths looked up while checking an
	// archive's links: thousands of ordinary links cost kilobytes, while
	// links made to cost a resolution each of 40 hops of 2,000 segments
	// stop here instead of taking the worker's time.
	linkBudget = 256 << 20
)

// Limits bound one extraction.
type Limits struct {
	// MaxBytes bounds the archive as read and the sum of its files' sizes
	// and of its headers' names, link names and PAX records
	// (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxEntries bounds the entries (0: DefaultMaxEntries).
	MaxEntries int
	// MaxDepth bounds the components of a name (0: DefaultMaxDepth).
	MaxDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
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
	// LinksAsIs keeps every symbolic link with the target it has, one
	// that leads out of the directory too: for a tree its agent made
	// itself (a session's checkpoint), whose links were its own. Links
	// are written and never followed, by the extraction or by the tree's
	// writer, whatever their target.
	LinksAsIs bool
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

// sourceReader marks the archive's errors apart from the disk's in what
// the Writer's copy of a file returns.
type sourceReader struct{ r io.Reader }

func (c *sourceReader) Read(p []byte) (int, error) {
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
