package outputs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/batonhq/baton/internal/fsat"
)

// ErrLimit is wrapped by the error of a capture stopped at a limit.
var ErrLimit = errors.New("outputs: over a limit")

// Bounds of the walk: an agent can make a tree of any depth and any path
// length (mkdir a; cd a, for ever), and what lies past them is noted and
// skipped, never followed, so a walk costs time linear in the entries it
// lists and memory bounded by their names.
const (
	// MaxDepth bounds the directory levels below the workspace.
	MaxDepth = 256
	// MaxPathBytes bounds a path's bytes (PATH_MAX less its NUL).
	MaxPathBytes = 4095
)

// op is what a workspace path became relative to the baseline.
type op uint8

const (
	opSame op = iota
	opAdd
	opModify
	opDelete
)

// entry is one workspace path the walk hands over: a regular file or a
// link that differs from the baseline or that a files pattern chose, or a
// seed gone from the workspace (opDelete).
type entry struct {
	rel    string // slash separated, as listed (any bytes but '/' and NUL)
	name   string // rel's last segment
	link   bool
	target string // a link's target
	size   int64  // a file's apparent size (sparse files count whole)
	exec   bool
	op     op
	file   bool // chosen by a files pattern
	seeded bool
	seed   baseEntry // what was seeded at rel, if seeded
	// dirfd is rel's directory in the workspace and base its baseline
	// directory (nil: none), valid only while the entry is visited.
	dirfd int
	base  baseDir
}

// open opens the workspace file of an entry being visited.
func (e *entry) open() (*os.File, os.FileInfo, error) {
	return fsat.OpenFile(e.dirfd, e.name, EscapePath)
}

// maxNotes bounds the notes a capture keeps; past it they are counted.
const maxNotes = 20

// walker walks a workspace and its baseline side by side, a directory at
// a time, by descriptors: each step is one syscall relative to its
// parent's descriptor, never through a link. It keeps only the directories
// it is in (at most MaxDepth), each with its names.
type walker struct {
	ctx     context.Context
	pol     Policy
	visit   func(*entry) error
	n       int // workspace entries listed
	skipped int // entries past MaxDepth or MaxPathBytes
	notes   []string
	dropped int // notes not kept
}

func (w *walker) note(format string, args ...any) {
	if len(w.notes) < maxNotes {
		w.notes = append(w.notes, fmt.Sprintf(format, args...))
		return
	}
	w.dropped++
}

// frame is a directory the walk is in.
type frame struct {
	ws    *os.File // nil: only in the baseline (its seeds are deleted)
	base  baseDir  // nil: not seeded
	rel   string   // "" for the top
	depth int
	kids  []kid
	next  int
}

// kid is one name of a frame, in the workspace, the baseline or both.
type kid struct {
	name string
	dir  bool // a directory: sorted as name+"/", so the walk goes in path order
	inWS bool
	typ  fs.FileMode // its type in the workspace
	seed *baseChild
}

func (k kid) key() string {
	if k.dir {
		return k.name + "/"
	}
	return k.name
}

// walk visits, in path order (git's), every entry of the workspace top
// against the baseline's top (nil: nothing seeded) that the policy keeps.
// It returns an error wrapping ErrLimit past the entry limit, the
// context's error when it ends, and visit's errors.
func (w *walker) walk(top *os.File, base baseDir, visit func(*entry) error) error {
	w.visit = visit
	ws, err := fsat.OpenDir(int(top.Fd()), ".") // the walk's own, closed as it ends
	if err != nil {
		base.close()
		return &diffError{fmt.Errorf("workspace not readable: %w", err)}
	}
	root, err := w.open(ws, base, "", 0)
	if err != nil {
		return err
	}
	stack := []*frame{root}
	defer func() {
		for _, f := range stack {
			f.close()
		}
	}()
	for len(stack) > 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		f := stack[len(stack)-1]
		if f.next == len(f.kids) {
			f.close()
			stack = stack[:len(stack)-1]
			continue
		}
		k := f.kids[f.next]
		f.next++
		if f.rel == "" && slices.Contains(w.pol.SkipTop, k.name) {
			continue
		}
		rel := k.name
		if f.rel != "" {
			rel = f.rel + "/" + k.name
		}
		if len(rel) > MaxPathBytes {
			w.skip("%s: skipped: its path is longer than %d bytes", shortPath(rel), MaxPathBytes)
			continue
		}
		if !k.dir {
			if err := w.leaf(f, k, rel); err != nil {
				return err
			}
			continue
		}
		if f.depth+1 > MaxDepth {
			w.skip("%s: skipped: deeper than %d directories", shortPath(rel), MaxDepth)
			continue
		}
		var ws *os.File
		if k.inWS {
			if ws, err = fsat.OpenDir(int(f.ws.Fd()), k.name); err != nil {
				w.note("%s: directory not read: %v", shortPath(rel), errors.Unwrap(err))
				continue
			}
		}
		var sub baseDir
		if k.seed != nil {
			if sub, err = f.base.sub(k.name); err != nil {
				if ws != nil {
					ws.Close()
				}
				return &diffError{fmt.Errorf("read the baseline at %s: %w", shortPath(rel), err)}
			}
		}
		child, err := w.open(ws, sub, rel, f.depth+1)
		if err != nil {
			return err
		}
		stack = append(stack, child)
	}
	return nil
}

func (w *walker) skip(format string, args ...any) {
	w.skipped++
	w.note(format, args...)
}

// open lists the directory rel, open as ws in the workspace (nil: not
// there) and as base in the baseline (nil: not seeded), into a frame that
// owns both.
func (w *walker) open(ws *os.File, base baseDir, rel string, depth int) (*frame, error) {
	f := &frame{ws: ws, base: base, rel: rel, depth: depth}
	at := map[string]int{}
	if ws != nil {
		for {
			ents, err := ws.ReadDir(1024)
			for _, e := range ents {
				if w.n++; w.n > w.pol.maxEntries() {
					f.close()
					return nil, &diffError{fmt.Errorf("%w: the workspace has more than %d entries", ErrLimit, w.pol.maxEntries())}
				}
				at[e.Name()] = len(f.kids)
				f.kids = append(f.kids, kid{name: e.Name(), dir: e.IsDir(), inWS: true, typ: e.Type()})
			}
			if err == io.EOF || (err == nil && len(ents) == 0) {
				break
			}
			if err != nil {
				w.note("%s: directory not fully read: %v", shortPath(orTop(rel)), err)
				break
			}
		}
	}
	if base != nil {
		seeds, err := base.list()
		if err != nil {
			f.close()
			return nil, &diffError{err}
		}
		for i := range seeds {
			s := &seeds[i]
			if j, ok := at[s.name]; ok && f.kids[j].dir == s.dir {
				f.kids[j].seed = s
				continue
			}
			// Gone, or a directory become a file (or the reverse): the
			// seed is deleted, what is there now added.
			f.kids = append(f.kids, kid{name: s.name, dir: s.dir, seed: s})
		}
	}
	slices.SortStableFunc(f.kids, func(a, b kid) int {
		if c := strings.Compare(a.key(), b.key()); c != 0 {
			return c
		}
		// A deleted seed before what took its place.
		switch {
		case !a.inWS && b.inWS:
			return -1
		case a.inWS && !b.inWS:
			return 1
		}
		return 0
	})
	return f, nil
}

func (f *frame) close() {
	if f.ws != nil {
		f.ws.Close()
		f.ws = nil
	}
	if f.base != nil {
		f.base.close()
		f.base = nil
	}
}

// leaf classifies the non-directory k of f against its seed: a regular
// file by its size and mode alone unless it is the size of its seed, when
// it is compared.
func (w *walker) leaf(f *frame, k kid, rel string) error {
	e := entry{rel: rel, name: k.name, dirfd: -1, base: f.base}
	if f.ws != nil {
		e.dirfd = int(f.ws.Fd())
	}
	if k.seed != nil {
		e.seeded, e.seed = true, k.seed.baseEntry
	}
	if !k.inWS {
		return w.deleted(&e)
	}
	switch {
	case k.typ&fs.ModeSymlink != 0:
		target, err := fsat.Readlink(e.dirfd, k.name)
		if err != nil {
			w.note("%s: link not read: %v", shortPath(rel), errors.Unwrap(err))
			return w.deleted(&e)
		}
		e.link, e.target, e.size = true, target, int64(len(target))
		if k.seed != nil && e.seed.link && e.seed.target == target {
			return w.keep(&e, opSame)
		}
		if err := w.deleted(&e); err != nil {
			return err
		}
		return w.keep(&e, opAdd)
	case k.typ.IsRegular():
		st, err := fsat.Lstat(e.dirfd, k.name)
		if err == nil && fsat.FileMode(&st)&fs.ModeType != 0 {
			err = fmt.Errorf("%s: %w", shortPath(rel), fsat.ErrNotRegular)
		}
		if err != nil {
			w.note("%s: not read: %v", shortPath(rel), err)
			return w.deleted(&e)
		}
		e.size, e.exec = st.Size, st.Mode&0o111 != 0
		if k.seed == nil || e.seed.link {
			// A seeded link become a file: git shows a deletion and an
			// addition.
			if err := w.deleted(&e); err != nil {
				return err
			}
			return w.keep(&e, opAdd)
		}
		o := opModify
		if e.size == e.seed.size && e.exec == e.seed.exec {
			same, err := sameContent(e.dirfd, f.base, k.name, e.size)
			if err != nil {
				w.note("%s: not read: %v", shortPath(rel), err)
				return nil
			}
			if same {
				o = opSame
			}
		}
		return w.keep(&e, o)
	default:
		w.note("%s: skipped: %s", shortPath(rel), kindOf(k.typ))
		return w.deleted(&e)
	}
}

// deleted visits e's seed, if any, as deleted (for the diff only).
func (w *walker) deleted(e *entry) error {
	if !w.pol.Diff || !e.seeded {
		return nil
	}
	d := *e
	d.op, d.file = opDelete, false
	return w.visit(&d)
}

// keep visits e if the diff or the files patterns want it.
func (w *walker) keep(e *entry, o op) error {
	e.op = o
	e.file = len(w.pol.Files) > 0 && MatchAny(w.pol.Files, e.rel) && (len(w.pol.Within) == 0 || MatchAny(w.pol.Within, e.rel))
	if (w.pol.Diff && e.op != opSame) || e.file {
		return w.visit(e)
	}
	return nil
}

func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file, directory or link"
}

// orTop names the top directory in a note.
func orTop(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// shortPath is rel escaped for a note or an error, cut to its first 256
// bytes: a status lists a capture's notes, and must stay small.
func shortPath(rel string) string {
	const keep = 256
	if len(rel) <= keep {
		return EscapePath(rel)
	}
	return fmt.Sprintf("%s… (%d bytes)", EscapePath(rel[:keep]), len(rel))
}
