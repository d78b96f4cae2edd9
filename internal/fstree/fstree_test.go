package fstree_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/fstree"
)

// chain is a name of depth components, each seg.
func chain(seg string, depth int) string {
	return strings.TrimSuffix(strings.Repeat(seg+"/", depth), "/")
}

func newWriter(t *testing.T, o fstree.Options) (*fstree.Writer, string) {
	t.Helper()
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	w, err := fstree.New(t.Context(), root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, ws
}

func TestCheckName(t *testing.T) {
	w, _ := newWriter(t, fstree.Options{MaxDepth: 4})
	for _, tc := range []struct {
		name, clean string
		parts       int
		want        error
		msg         string
	}{
		{"a/b/c", "a/b/c", 3, nil, ""},
		{"./a//b/", "a/b", 2, nil, ""},
		{".", ".", 0, nil, ""},
		{"", ".", 0, nil, ""},
		{"../x", "", 0, fstree.ErrUnsafe, `"../x" climbs out`},
		{"a/../../x", "", 0, fstree.ErrUnsafe, "climbs out"},
		{"/etc/passwd", "", 0, fstree.ErrUnsafe, `"/etc/passwd" is absolute`},
		{"a\x00b", "", 0, fstree.ErrUnsafe, "NUL byte"},
		{"a/b/c/d/e", "", 0, fstree.ErrLimit, "5 levels deep, more than 4"},
		{strings.Repeat("n", 256), "", 0, fstree.ErrLimit, "component of 256 bytes, more than 255"},
		{strings.Repeat("n", 4096), "", 0, fstree.ErrLimit, "is 4096 bytes, more than 4095"},
	} {
		clean, parts, err := w.CheckName(tc.name)
		if !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("%.40q: got %v, want %v (%s)", tc.name, err, tc.want, tc.msg)
			continue
		}
		if err == nil && (clean != tc.clean || len(parts) != tc.parts) {
			t.Errorf("%q: got %q %q, want %q of %d parts", tc.name, clean, parts, tc.clean, tc.parts)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%.40q: the error holds the whole name: %d bytes", tc.name, len(err.Error()))
		}
	}
}

// TestWriteFiles: names land as later entries of an archive would, a
// file or link of the same name replaced, never written through a link
// or a file, never replacing a directory.
func TestWriteFiles(t *testing.T) {
	ws := t.TempDir()
	for _, err := range []error{
		os.WriteFile(filepath.Join(ws, "target"), []byte("before"), 0o644),
		os.Symlink("target", filepath.Join(ws, "latest")),
		os.Symlink(".", filepath.Join(ws, "here")),
		os.WriteFile(filepath.Join(ws, "file"), nil, 0o644),
		os.Mkdir(filepath.Join(ws, "dir"), 0o755),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	write := func(files map[string]string) error {
		return fstree.WriteFiles(t.Context(), root, files, fstree.Options{})
	}
	if err := write(map[string]string{"latest": "seed", "a/b/c": "deep", chain("d", fstree.DefaultMaxDepth): "at the bound"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "target")); string(b) != "before" {
		t.Errorf("written through the link: target holds %q", b)
	}
	for p, want := range map[string]string{"latest": "seed", "a/b/c": "deep", chain("d", fstree.DefaultMaxDepth): "at the bound"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Errorf("%.20s: %v, %v", p, fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("%.20s holds %q", p, b)
		}
	}
	for _, tc := range []struct {
		name string
		want error
		msg  string
	}{
		{"here/x", fstree.ErrUnsafe, `"here/x" goes through the link "here"`},
		{"file/x", fstree.ErrUnsafe, `"file/x" goes through the file "file"`},
		{"dir", fstree.ErrUnsafe, `"dir" is a directory and, later, not one`},
		{".", fstree.ErrUnsafe, "names the directory itself"},
		{"../x", fstree.ErrUnsafe, "climbs out"},
		{chain("d", fstree.DefaultMaxDepth+1), fstree.ErrLimit, "257 levels deep"},
	} {
		if err := write(map[string]string{tc.name: "x"}); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%.40q: got %v, want %v (%s)", tc.name, err, tc.want, tc.msg)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x was written through the link here: %v", err)
	}
}

// TestWriteFilesCancel: a cancelled context stops the walk at the first
// component.
func TestWriteFilesCancel(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := fstree.WriteFiles(ctx, root, map[string]string{"a/b": "x"}, fstree.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := root.Lstat("a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a was made: %v", err)
	}
}

// FuzzCheckName: a name taken is clean, relative, within the bounds and
// split into its components; a refusal wraps a sentinel on one line.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"a/b", "./a//b/", "../x", "/x", "a\x00", chain("a", 9), strings.Repeat("n", 300), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		const depth = 8
		w, _ := newWriter(t, fstree.Options{MaxDepth: depth})
		clean, parts, err := w.CheckName(name)
		if err != nil {
			if !errors.Is(err, fstree.ErrUnsafe) && !errors.Is(err, fstree.ErrLimit) {
				t.Fatalf("%q: %v wraps no sentinel", name, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q spans lines", err)
			}
			return
		}
		if clean == "." {
			if len(parts) != 0 {
				t.Fatalf("%q: the directory itself has parts %q", name, parts)
			}
			return
		}
		if strings.Join(parts, "/") != clean || filepath.IsAbs(clean) || len(clean) > fstree.MaxPath || len(parts) > depth {
			t.Fatalf("%q: took %q %q", name, clean, parts)
		}
		for _, p := range parts {
			if p == "" || p == "." || p == ".." || len(p) > fstree.MaxComponent || strings.IndexByte(p, 0) >= 0 {
				t.Fatalf("%q: took the component %q", name, p)
			}
		}
	})
}
