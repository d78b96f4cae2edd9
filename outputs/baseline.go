package outputs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/batonhq/baton/internal/fsat"
)

// Baseline is what a workspace was seeded with: the "before" of its diff.
// It is never read from the workspace, which the agent may have rewritten
// (.git included), but from where the agent cannot write. The walk reads
// it one directory at a time beside the workspace's.
type Baseline interface {
	// top opens the baseline's top directory.
	top() (baseDir, error)
}

// baseDir is one directory of a baseline.
type baseDir interface {
	// list is the directory's regular files, links and directories.
	list() ([]baseChild, error)
	// sub opens the child directory name.
	sub(name string) (baseDir, error)
	// open reads the child name (a link's target for a link).
	open(name string) (io.ReadCloser, error)
	close()
}

// baseChild is one seeded name of a directory.
type baseChild struct {
	name string
	dir  bool
	baseEntry
}

// baseEntry is one seeded regular file or link.
type baseEntry struct {
	link   bool
	target string
	exec   bool
	size   int64
}

func (b baseEntry) mode() string {
	switch {
	case b.link:
		return "120000"
	case b.exec:
		return "100755"
	}
	return "100644"
}

// FilesBaseline is a job's seed files (path → content), the run's spec
// keeps; nil is an empty baseline.
func FilesBaseline(files map[string]string) Baseline {
	// Laid out by the clean path the walk lists, as the seeding wrote them.
	top := &filesDir{}
	for k, v := range files {
		d := top
		segs := strings.Split(path.Clean(k), "/")
		for _, s := range segs[:len(segs)-1] {
			if d.dirs[s] == nil {
				if d.dirs == nil {
					d.dirs = map[string]*filesDir{}
				}
				d.dirs[s] = &filesDir{}
			}
			d = d.dirs[s]
		}
		if d.files == nil {
			d.files = map[string]string{}
		}
		d.files[segs[len(segs)-1]] = v
	}
	return top
}

// filesDir is a directory of a job's seed files.
type filesDir struct {
	files map[string]string
	dirs  map[string]*filesDir
}

func (f *filesDir) top() (baseDir, error) { return f, nil }

func (f *filesDir) list() ([]baseChild, error) {
	out := make([]baseChild, 0, len(f.files)+len(f.dirs))
	for k, v := range f.files {
		out = append(out, baseChild{name: k, baseEntry: baseEntry{size: int64(len(v))}})
	}
	for k := range f.dirs {
		out = append(out, baseChild{name: k, dir: true})
	}
	return out, nil
}

func (f *filesDir) sub(name string) (baseDir, error) {
	if d := f.dirs[name]; d != nil {
		return d, nil
	}
	return nil, fs.ErrNotExist
}

func (f *filesDir) open(name string) (io.ReadCloser, error) {
	v, ok := f.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(strings.NewReader(v)), nil
}

func (f *filesDir) close() {}

// TreeBaseline is a directory laid out as the workspace was seeded (a
// workspace archive with the job's files written over it), somewhere the
// agent cannot write. It is read by descriptors, without following a link.
func TreeBaseline(root *os.Root) Baseline { return treeBaseline{root} }

type treeBaseline struct{ root *os.Root }

func (t treeBaseline) top() (baseDir, error) {
	f, err := t.root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("read the baseline: %w", err)
	}
	return treeDir{f}, nil
}

// treeDir is an open directory of a TreeBaseline.
type treeDir struct{ f *os.File }

func (t treeDir) list() ([]baseChild, error) {
	ents, err := t.f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read the baseline: %w", err)
	}
	fd := int(t.f.Fd())
	out := make([]baseChild, 0, len(ents))
	for _, e := range ents {
		c := baseChild{name: e.Name()}
		switch {
		case e.IsDir():
			c.dir = true
		case e.Type()&fs.ModeSymlink != 0:
			if c.target, err = fsat.Readlink(fd, c.name); err != nil {
				return nil, fmt.Errorf("read the baseline: %w", err)
			}
			c.link, c.size = true, int64(len(c.target))
		case e.Type().IsRegular():
			st, err := fsat.Lstat(fd, c.name)
			if err != nil {
				return nil, fmt.Errorf("read the baseline: %w", err)
			}
			c.exec, c.size = st.Mode&0o111 != 0, st.Size
		default:
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

func (t treeDir) sub(name string) (baseDir, error) {
	f, err := fsat.OpenDir(int(t.f.Fd()), name)
	if err != nil {
		return nil, err
	}
	return treeDir{f}, nil
}

func (t treeDir) open(name string) (io.ReadCloser, error) {
	fd := int(t.f.Fd())
	if st, err := fsat.Lstat(fd, name); err == nil && fsat.FileMode(&st)&fs.ModeSymlink != 0 {
		target, err := fsat.Readlink(fd, name)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader(target)), nil
	}
	f, _, err := fsat.OpenFile(fd, name, EscapePath)
	return f, err
}

func (t treeDir) close() { t.f.Close() }

// readBase reads the seeded rel (name in d) whole, at most max bytes (the
// diff it goes into could hold no more).
func readBase(d baseDir, rel, name string, b baseEntry, max int64) (string, error) {
	if b.size > max {
		return "", &diffError{fmt.Errorf("%w: the seeded %s (%d bytes) does not fit in what is left of limits.outputs (%d bytes)", ErrLimit, shortPath(rel), b.size, max)}
	}
	r, err := d.open(name)
	if err != nil {
		return "", &diffError{fmt.Errorf("baseline %s: %w", shortPath(rel), err)}
	}
	defer r.Close()
	var sb strings.Builder
	if _, err := io.Copy(&sb, io.LimitReader(r, max+1)); err != nil {
		return "", &diffError{fmt.Errorf("baseline %s: %w", shortPath(rel), err)}
	}
	return sb.String(), nil
}

// sameContent reports whether the workspace's regular file name of dirfd
// has the content of the seeded name of d (both of size n), reading both a
// block at a time.
func sameContent(dirfd int, d baseDir, name string, n int64) (bool, error) {
	f, _, err := fsat.OpenFile(dirfd, name, EscapePath)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := d.open(name)
	if err != nil {
		return false, fmt.Errorf("baseline: %w", err)
	}
	defer b.Close()
	cur, old := make([]byte, 64<<10), make([]byte, 64<<10)
	for left := n; left > 0; {
		k := min(left, int64(len(cur)))
		if _, err := io.ReadFull(f, cur[:k]); err != nil {
			return false, err
		}
		if _, err := io.ReadFull(b, old[:k]); err != nil {
			return false, fmt.Errorf("baseline: %w", err)
		}
		if !bytes.Equal(cur[:k], old[:k]) {
			return false, nil
		}
		left -= k
	}
	// Grown since it was listed: not the same.
	if k, _ := f.Read(cur[:1]); k > 0 {
		return false, nil
	}
	return true, nil
}
