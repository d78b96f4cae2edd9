package outputs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// ErrLimit is wrapped by the error of a capture stopped at a limit.
var ErrLimit = errors.New("outputs: over a limit")

// op is what a workspace path became relative to the baseline.
type op uint8

const (
	opSame op = iota
	opAdd
	opModify
	opDelete
)

// entry is one workspace path capture keeps: a regular file or a link that
// differs from the baseline or that a files pattern chose.
type entry struct {
	rel    string // slash separated, as listed (any bytes but '/' and NUL)
	link   bool
	target string // a link's target
	size   int64  // a file's apparent size (sparse files count whole)
	exec   bool
	// oldExec: the seeded file was executable (a modified file's old mode).
	oldExec bool
	op      op
	file    bool // chosen by a files pattern
}

// scan is the result of walking a workspace.
type scan struct {
	entries []entry // in walk order (each directory's names sorted)
	deleted []string
	notes   []string
	dropped int // notes not kept
}

// maxNotes bounds the notes a capture keeps; past it they are counted.
const maxNotes = 20

func (s *scan) note(format string, args ...any) {
	if len(s.notes) < maxNotes {
		s.notes = append(s.notes, fmt.Sprintf(format, args...))
		return
	}
	s.dropped++
}

// walker walks a workspace through root, never following a link.
type walker struct {
	root *os.Root
	src  Baseline
	base map[string]baseEntry
	pol  Policy
	seen map[string]bool // baseline paths found as files
	n    int             // entries listed
	s    scan
}

// walk lists the workspace under root against the baseline's entries.
func walk(root *os.Root, src Baseline, base map[string]baseEntry, pol Policy) (*scan, error) {
	w := &walker{root: root, src: src, base: base, pol: pol, seen: map[string]bool{}}
	if err := w.dir("."); err != nil {
		return nil, err
	}
	for _, p := range sortedKeys(base) {
		if !w.seen[p] {
			w.s.deleted = append(w.s.deleted, p)
		}
	}
	return &w.s, nil
}

func (w *walker) dir(rel string) error {
	f, err := openDir(w.root, rel)
	if err != nil {
		w.s.note("%s: directory not read: %v", EscapePath(rel), err)
		return nil
	}
	var names []string
	types := map[string]fs.FileMode{}
	for {
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			w.n++
			if w.n > w.pol.maxEntries() {
				f.Close()
				return fmt.Errorf("%w: the workspace has more than %d entries", ErrLimit, w.pol.maxEntries())
			}
			names = append(names, e.Name())
			types[e.Name()] = e.Type()
		}
		if err == io.EOF || (err == nil && len(ents) == 0) {
			break
		}
		if err != nil {
			w.s.note("%s: directory not fully read: %v", EscapePath(rel), err)
			break
		}
	}
	f.Close()
	slices.Sort(names)
	for _, name := range names {
		p := name
		if rel != "." {
			p = rel + "/" + name
		}
		t := types[name]
		switch {
		case t.IsDir():
			if err := w.dir(p); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			target, err := w.root.Readlink(p)
			if err != nil {
				w.s.note("%s: link not read: %v", EscapePath(p), err)
				continue
			}
			if b, ok := w.base[p]; ok && b.link && b.target == target {
				w.seen[p] = true
				w.add(entry{rel: p, link: true, target: target, size: int64(len(target)), op: opSame}, true)
				continue
			}
			w.add(entry{rel: p, link: true, target: target, size: int64(len(target))}, false)
		case t.IsRegular():
			if err := w.file(p); err != nil {
				w.s.note("%s: not read: %v", EscapePath(p), err)
			}
		default:
			w.s.note("%s: skipped: %s", EscapePath(p), kindOf(t))
		}
	}
	return nil
}

// file classifies the regular file p against the baseline: by its size
// and mode alone unless it is the size of its seed, when it is compared.
func (w *walker) file(p string) error {
	st, err := w.root.Lstat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", EscapePath(p), errNotRegular)
	}
	e := entry{rel: p, size: st.Size(), exec: st.Mode()&0o111 != 0}
	b, seeded := w.base[p]
	if !seeded || b.link {
		// A seeded link become a file stays unseen: git shows a deletion
		// and an addition.
		e.op = opAdd
		w.add(e, false)
		return nil
	}
	w.seen[p] = true
	e.op, e.oldExec = opModify, b.exec
	if e.size == b.size && e.exec == b.exec {
		same, err := sameContent(w.root, w.src, p, e.size)
		if err != nil {
			return err
		}
		if same {
			e.op = opSame
		}
	}
	w.add(e, true)
	return nil
}

// add keeps e if the diff or the files patterns want it.
func (w *walker) add(e entry, seeded bool) {
	if !seeded {
		e.op = opAdd
	}
	e.file = len(w.pol.Files) > 0 && MatchAny(w.pol.Files, e.rel) && (len(w.pol.Within) == 0 || MatchAny(w.pol.Within, e.rel))
	if (w.pol.Diff && e.op != opSame) || e.file {
		w.s.entries = append(w.s.entries, e)
	}
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
