package unpack_test

import (
	"archive/tar"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/unpack"
)

// FuzzExtract feeds bytes to Extract as an archive. Properties: it never
// panics; nothing appears outside the workspace; the tree holds no device,
// FIFO, setuid, setgid or sticky bit, and no absolute link; a refusal
// wraps a sentinel and fits on one line; no path is deeper than
// MaxDepth.
func FuzzExtract(f *testing.F) {
	for _, b := range [][]byte{
		tarOf(f, d("a"), file("a/b", "x"), sl("l", "a/b"), hl("h", "a/b")),
		tarOf(f, sl("l", "."), file("l/x", "y")),
		tarOf(f, sl("p", "q/.."), sl("q", ".")),
		tarOf(f, file("../x", "y")),
		tarOf(f, ent{name: "p", typ: tar.TypeFifo}),
		gz(f, tarOf(f, file("dup", "1"), file("dup", "2"))),
		tarOf(f, file(chain("a", 8), "x"), file(chain("a", 9), "y")),
		tarOf(f, d(chain("a", 6)), sl(chain("a", 7), "../b"), hl(chain("b", 8), chain("a", 7))),
		tarOf(f, file(name(4096, 255), "x")),
		gz(f, tarOf(f, file(chain("a", 3000), "x"))),
		{0x1f, 0x8b, 8, 0, 0, 0, 0, 0},
		{},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const depth = 8
		ws, _, err := extract(t, data, unpack.Limits{MaxBytes: 1 << 20, MaxEntries: 64, MaxDepth: depth})
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("error %q spans lines", err)
		}
		if err != nil && !errors.Is(err, unpack.ErrUnsafe) && !errors.Is(err, unpack.ErrLimit) && !errors.Is(err, unpack.ErrCorrupt) {
			t.Fatalf("error %q wraps no sentinel", err)
		}
		_ = filepath.WalkDir(ws, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			st, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			if rel, _ := filepath.Rel(ws, p); rel != "." && strings.Count(rel, "/") >= depth {
				t.Fatalf("%s is deeper than %d", rel, depth)
			}
			m := st.Mode()
			if m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Fatalf("%s: mode %v", p, m)
			}
			if m&fs.ModeSymlink != 0 {
				if target, _ := os.Readlink(p); filepath.IsAbs(target) {
					t.Fatalf("%s: absolute link to %s", p, target)
				}
			}
			return nil
		})
		// Leave the tree removable whatever modes it was given.
		_ = filepath.WalkDir(ws, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	})
}
