package outputs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Baseline is what a workspace was seeded with: the "before" of its diff.
// It is never read from the workspace, which the agent may have rewritten
// (.git included), but from where the agent cannot write.
type Baseline interface {
	// entries lists the seeded regular files and links by clean,
	// slash-separated path.
	entries() (map[string]baseEntry, error)
	// open reads a seeded file (a link's target for a link).
	open(p string) (io.ReadCloser, error)
}

// baseEntry is one seeded path.
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
	// Keyed by the clean path the walk lists, as the seeding wrote them.
	out := make(filesBaseline, len(files))
	for k, v := range files {
		out[path.Clean(k)] = v
	}
	return out
}

type filesBaseline map[string]string

func (f filesBaseline) entries() (map[string]baseEntry, error) {
	out := make(map[string]baseEntry, len(f))
	for k, v := range f {
		out[k] = baseEntry{size: int64(len(v))}
	}
	return out, nil
}

func (f filesBaseline) open(p string) (io.ReadCloser, error) {
	v, ok := f[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(strings.NewReader(v)), nil
}

// TreeBaseline is a directory laid out as the workspace was seeded (a
// workspace archive with the job's files written over it), somewhere the
// agent cannot write. It is read without following a link.
func TreeBaseline(root *os.Root) Baseline { return treeBaseline{root} }

type treeBaseline struct{ root *os.Root }

func (t treeBaseline) entries() (map[string]baseEntry, error) {
	out := map[string]baseEntry{}
	err := fs.WalkDir(t.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := t.root.Readlink(p)
			if err != nil {
				return err
			}
			out[p] = baseEntry{link: true, target: target, size: int64(len(target))}
		case d.Type().IsRegular():
			st, err := d.Info()
			if err != nil {
				return err
			}
			out[p] = baseEntry{exec: st.Mode()&0o111 != 0, size: st.Size()}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the baseline: %w", err)
	}
	return out, nil
}

func (t treeBaseline) open(p string) (io.ReadCloser, error) {
	if st, err := t.root.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		target, err := t.root.Readlink(p)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader(target)), nil
	}
	f, _, err := openRegular(t.root, p)
	return f, err
}

// readBase reads the seeded p whole, at most max bytes (the diff it goes
// into could hold no more).
func readBase(src Baseline, p string, b baseEntry, max int64) (string, error) {
	if b.size > max {
		return "", &diffError{fmt.Errorf("%w: the seeded %s (%d bytes) does not fit in what is left of limits.outputs (%d bytes)", ErrLimit, EscapePath(p), b.size, max)}
	}
	r, err := src.open(p)
	if err != nil {
		return "", &diffError{fmt.Errorf("baseline %s: %w", EscapePath(p), err)}
	}
	defer r.Close()
	var sb strings.Builder
	if _, err := io.Copy(&sb, io.LimitReader(r, max+1)); err != nil {
		return "", &diffError{fmt.Errorf("baseline %s: %w", EscapePath(p), err)}
	}
	return sb.String(), nil
}

// sameContent reports whether the workspace's regular file p has the
// content of the seeded p (both of size n), reading both a block at a time.
func sameContent(root *os.Root, src Baseline, p string, n int64) (bool, error) {
	f, _, err := openRegular(root, p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := src.open(p)
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
