package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/fsat"
	"github.com/batonhq/baton/internal/fstree"
	"github.com/batonhq/baton/outputs"
)

// Tree names a session's two roots on the host and what a checkpoint
// leaves out of them.
type Tree struct {
	Workspace, Home string
	// Exclude are globs (outputs.Match) of paths a checkpoint skips: a
	// workspace path as it is ("node_modules/**"), a home path after
	// "~/" ("~/.cache/**"). A directory that matches is skipped whole.
	Exclude []string
	// MaxBytes bounds the files' bytes, MaxEntries the entries of both
	// roots (0: DefaultMaxBytes, DefaultMaxEntries).
	MaxBytes   int64
	MaxEntries int
}

func (t Tree) roots() [2][2]string {
	return [2][2]string{{RootWorkspace, t.Workspace}, {RootHome, t.Home}}
}

// maxNotes bounds the notes a scan keeps; past it they are counted.
const maxNotes = 20

// scanner lists a tree by descriptors, never through a link.
type scanner struct {
	ctx   context.Context
	t     Tree
	x     *Index
	bytes int64
	root  int // the length of the current root's name and its slash
	notes []string
	more  int // notes not kept
}

// Scan lists the tree: every directory, file and link of both roots but
// those Exclude names, with their stat. FIFOs, sockets and devices are
// skipped with a note. It fails with ErrLimit past MaxBytes, MaxEntries,
// MaxDepth or a path of fstree.MaxPath bytes.
func Scan(ctx context.Context, t Tree) (*Index, []string, error) {
	var tops [2]*os.File
	for i, r := range t.roots() {
		top, err := fsat.OpenDir(unix.AT_FDCWD, r[1])
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: the %s: %w", r[0], err)
		}
		defer top.Close()
		tops[i] = top
	}
	return scan(ctx, t, tops)
}

// ScanRoots is Scan of the tree whose workspace and home are open as ws
// and home (t's paths are not read).
func ScanRoots(ctx context.Context, ws, home *os.Root, t Tree) (*Index, []string, error) {
	var tops [2]*os.File
	for i, r := range []*os.Root{ws, home} {
		top, err := r.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: %w", err)
		}
		defer top.Close()
		tops[i] = top
	}
	return scan(ctx, t, tops)
}

// scan lists the tree whose roots are open as tops (workspace, home).
func scan(ctx context.Context, t Tree, tops [2]*os.File) (*Index, []string, error) {
	if t.MaxBytes <= 0 {
		t.MaxBytes = DefaultMaxBytes
	}
	if t.MaxEntries <= 0 {
		t.MaxEntries = DefaultMaxEntries
	}
	s := &scanner{ctx: ctx, t: t, x: &Index{Entries: map[string]Entry{}}}
	for i, name := range []string{RootWorkspace, RootHome} {
		// The walk's own descriptor: dir reads it to its end.
		top, err := fsat.OpenDir(int(tops[i].Fd()), ".")
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: the %s: %w", name, err)
		}
		glob := ""
		s.root = len(name) + 1
		if name == RootHome {
			glob = "~/"
		}
		err = s.dir(top, name, glob, 1)
		top.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	if s.more > 0 {
		s.notes = append(s.notes, fmt.Sprintf("and %d more skipped", s.more))
	}
	return s.x, s.notes, nil
}

func (s *scanner) note(format string, args ...any) {
	if len(s.notes) < maxNotes {
		s.notes = append(s.notes, fmt.Sprintf(format, args...))
		return
	}
	s.more++
}

// dir lists the directory d, whose path is prefix and whose paths the
// exclude globs see after glob.
func (s *scanner) dir(d *os.File, prefix, glob string, depth int) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("checkpoint: read %s: %w", fstree.Quote(prefix), err)
	}
	slices.Sort(names)
	fd := int(d.Fd())
	for _, name := range names {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		p := prefix + "/" + name
		st, err := fsat.Lstat(fd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // gone since listed
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		mode := fsat.FileMode(&st)
		if len(s.t.Exclude) > 0 && outputs.MatchAny(s.t.Exclude, glob+name) {
			continue
		}
		e := Entry{Mode: uint32(mode.Perm())}
		switch {
		case mode.IsDir():
			e.Kind = KindDir
		case mode.IsRegular():
			e = Entry{Kind: KindFile, Mode: e.Mode, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}
		case mode.Type() == os.ModeSymlink:
			target, err := fsat.Readlink(fd, name)
			if err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			e = Entry{Kind: KindLink, Mode: e.Mode, Target: target}
		default:
			s.note("%s skipped: not a file, directory or link", fstree.Quote(p))
			continue
		}
		if err := s.add(p, e, depth); err != nil {
			return err
		}
		if e.Kind != KindDir {
			continue
		}
		sub, err := fsat.OpenDir(fd, name)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return fmt.Errorf("checkpoint: %s changed while read", fstree.Quote(p))
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		err = s.dir(sub, p, glob+name+"/", depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// add lists path p with its entry e, depth levels below its root, within
// the limits.
func (s *scanner) add(p string, e Entry, depth int) error {
	switch {
	case depth > MaxDepth:
		return fmt.Errorf("%w: %s is deeper than %d levels", ErrLimit, fstree.Quote(p), MaxDepth)
	case len(p)-s.root > fstree.MaxPath:
		return fmt.Errorf("%w: %s is a path longer than %d bytes", ErrLimit, fstree.Quote(p), fstree.MaxPath)
	case len(s.x.Paths) >= s.t.MaxEntries:
		return fmt.Errorf("%w: more than %d files, directories and links", ErrLimit, s.t.MaxEntries)
	}
	if s.bytes += e.Size; s.bytes > s.t.MaxBytes {
		return fmt.Errorf("%w: the files are larger than %d bytes (at %s)", ErrLimit, s.t.MaxBytes, fstree.Quote(p))
	}
	s.x.Paths = append(s.x.Paths, p)
	s.x.Entries[p] = e
	return nil
}
