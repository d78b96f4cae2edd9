package unpack_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/unpack"
)

// ent is one tar entry of a test archive.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
	size int64 // when not len(body): a header that lies
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func d(name string) ent          { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func sl(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hl(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		size := int64(len(e.body))
		if e.typ != tar.TypeReg {
			size = 0
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: size,
			ModTime: time.Unix(1_700_000_000, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// zeros is a tar of one file of n zero bytes, written without holding it.
func zeros(t testing.TB, n int64) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "bomb", Typeflag: tar.TypeReg, Mode: 0o644, Size: n}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		if _, err := tw.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// extract extracts b into a fresh workspace inside a fresh parent and
// checks that nothing appeared beside the workspace.
func extract(t *testing.T, b []byte, lim unpack.Limits) (string, unpack.Stats, error) {
	t.Helper()
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	st, err := unpack.Extract(context.Background(), bytes.NewReader(b), root, unpack.Options{Limits: lim})
	names, rerr := os.ReadDir(parent)
	if rerr != nil || len(names) != 1 {
		t.Fatalf("the workspace's parent holds %v (%v): extraction wrote outside", names, rerr)
	}
	return ws, st, err
}

func TestExtractRefuses(t *testing.T) {
	small := unpack.Limits{MaxBytes: 1 << 20, MaxEntries: 100}
	many := make([]ent, 101)
	for i := range many {
		many[i] = file(strings.Repeat("x", i+1), "")
	}
	good := gz(t, tarOf(t, file("a.txt", strings.Repeat("hello\n", 5000)), file("b.txt", "b")))
	corrupt := slices.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xff
	badCRC := slices.Clone(good)
	badCRC[len(badCRC)-8] ^= 0xff // the gzip trailer's CRC-32
	plain := tarOf(t, file("a.txt", strings.Repeat("hello\n", 5000)))
	// Links each costing a long resolution, deep in the tree.
	deep := strings.TrimSuffix(strings.Repeat(strings.Repeat("d", 250)+"/", 8), "/")
	intricate := []ent{d(deep)}
	for i := range 200 {
		intricate = append(intricate, sl(fmt.Sprintf("%s/l%d", deep, i), strings.Repeat("x/../", 800)+"x"))
	}
	for _, tc := range []struct {
		name string
		data []byte
		lim  unpack.Limits
		want error
		msg  string
	}{
		{"dotdot", tarOf(t, file("../x", "evil")), small, unpack.ErrUnsafe, `"../x" climbs out`},
		{"dotdot inside", tarOf(t, file("a/../../x", "evil")), small, unpack.ErrUnsafe, "climbs out"},
		{"absolute", tarOf(t, file("/tmp/x", "evil")), small, unpack.ErrUnsafe, `"/tmp/x" is absolute`},
		{"absolute link", tarOf(t, sl("etc", "/etc")), small, unpack.ErrUnsafe, `points out, to "/etc"`},
		{"link up", tarOf(t, d("a"), sl("a/up", "../..")), small, unpack.ErrUnsafe, `"a/up" points out`},
		{"file through a link", tarOf(t, sl("l", "."), file("l/x", "evil")), small, unpack.ErrUnsafe, `"l/x" goes through the link "l"`},
		{"file through a link out", tarOf(t, sl("l", "/tmp"), file("l/x", "evil")), small, unpack.ErrUnsafe, "points out"},
		{"file through a file", tarOf(t, file("a", "x"), file("a/b", "y")), small, unpack.ErrUnsafe, `goes through the file "a"`},
		{"link chain out", tarOf(t, sl("p", "q/.."), sl("q", ".")), small, unpack.ErrUnsafe, `"p" points out`},
		{"link loop", tarOf(t, sl("a", "b"), sl("b", "a/x")), small, unpack.ErrUnsafe, "loops"},
		{"link target too long", tarOf(t, sl("l", strings.Repeat("a/", 2100))), small, unpack.ErrUnsafe, "target longer than 4095 bytes"},
		{"links too intricate", tarOf(t, intricate...), unpack.Limits{}, unpack.ErrLimit, "links are too intricate"},
		{"link inside through ..", tarOf(t, d("a"), d("b"), sl("a/l", "../b"), sl("a/m", "l/../../../x")), small, unpack.ErrUnsafe, `"a/m" points out`},
		{"hard link out", tarOf(t, hl("pw", "/etc/passwd")), small, unpack.ErrUnsafe, "absolute"},
		{"hard link up", tarOf(t, hl("pw", "../x")), small, unpack.ErrUnsafe, "climbs out"},
		{"hard link to nothing", tarOf(t, hl("h", "later"), file("later", "x")), small, unpack.ErrUnsafe, "not to a file earlier"},
		{"hard link to a link", tarOf(t, sl("s", "a"), hl("h", "s")), small, unpack.ErrUnsafe, "not to a file earlier"},
		{"char device", tarOf(t, ent{name: "null", typ: tar.TypeChar, mode: 0o666}), small, unpack.ErrUnsafe, `"null" is a device`},
		{"block device", tarOf(t, ent{name: "sda", typ: tar.TypeBlock, mode: 0o666}), small, unpack.ErrUnsafe, "is a device"},
		{"fifo", tarOf(t, ent{name: "p", typ: tar.TypeFifo, mode: 0o666}), small, unpack.ErrUnsafe, `"p" is a FIFO`},
		{"dir then file", tarOf(t, d("a"), file("a", "x")), small, unpack.ErrUnsafe, "is a directory and, later, not one"},
		{"file then dir", tarOf(t, file("a", "x"), d("a")), small, unpack.ErrUnsafe, "is a directory and, earlier, not one"},
		{"gzip bomb", zeros(t, 64<<20), small, unpack.ErrLimit, "larger than 1048576 bytes"},
		{"archive too big", plain, unpack.Limits{MaxBytes: 10_000}, unpack.ErrLimit, "larger than 10000"},
		{"too many entries", tarOf(t, many...), small, unpack.ErrLimit, "more than 100 entries"},
		{"corrupt gzip", corrupt, small, unpack.ErrCorrupt, ""},
		{"gzip checksum", badCRC, small, unpack.ErrCorrupt, ""},
		{"truncated gzip", good[:len(good)-20], small, unpack.ErrCorrupt, "truncated"},
		{"truncated tar", plain[:3000], small, unpack.ErrCorrupt, "truncated"},
		{"not a tar", bytes.Repeat([]byte("not a tar archive\n"), 100), small, unpack.ErrCorrupt, "tar"},
		{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, small, unpack.ErrCorrupt, "zstd is not supported"},
		{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0}, small, unpack.ErrCorrupt, "xz is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, _, err := extract(t, tc.data, tc.lim)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.want, tc.msg)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("error %q spans lines", err)
			}
			// Nothing the refused entry named exists anywhere.
			if _, err := os.Lstat(filepath.Join(ws, "..", "x")); err == nil {
				t.Fatal("x was written beside the workspace")
			}
		})
	}
}

func TestExtractKeeps(t *testing.T) {
	latin1 := "caf\xe9.txt" // not UTF-8: Linux names are bytes
	data := tarOf(t,
		d("src"), file("src/main.go", "package main\n"),
		ent{name: "bin/run", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755}, // setuid, cleared
		ent{name: "shared", typ: tar.TypeDir, mode: 0o1777},                       // sticky, cleared
		file(latin1, "bonjour"),
		file("dup", "first"), file("dup", "second"), // the later entry wins
		sl("link", "src/main.go"), sl("src/up", "../dup"), sl("dangling", "nowhere"),
		hl("hard", "src/main.go"),
		file("./dot/x", "dot"),
		ent{name: "ro", typ: tar.TypeDir, mode: 0o555}, file("ro/inside", "in a read-only directory"),
	)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"tar", data}, {"gzip", gz(t, data)}} {
		t.Run(tc.name, func(t *testing.T) {
			ws, st, err := extract(t, tc.data, unpack.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if st.SHA256 != sha256.Sum256(tc.data) || st.Read != int64(len(tc.data)) {
				t.Errorf("stats %+v: digest or size not the archive's", st)
			}
			read := func(p string) string {
				b, err := os.ReadFile(filepath.Join(ws, p))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			for p, want := range map[string]string{"src/main.go": "package main\n", latin1: "bonjour", "dup": "second",
				"link": "package main\n", "src/up": "second", "hard": "package main\n", "dot/x": "dot", "ro/inside": "in a read-only directory"} {
				if got := read(p); got != want {
					t.Errorf("%q = %q, want %q", p, got, want)
				}
			}
			for p, want := range map[string]fs.FileMode{"bin/run": 0o755, "shared": fs.ModeDir | 0o777, "ro": fs.ModeDir | 0o555, "src/main.go": 0o644} {
				st, err := os.Lstat(filepath.Join(ws, p))
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); got != want {
					t.Errorf("%s: mode %v, want %v", p, got, want)
				}
			}
			if st, err := os.Stat(filepath.Join(ws, "src/main.go")); err != nil || !st.ModTime().Equal(time.Unix(1_700_000_000, 0)) {
				t.Errorf("src/main.go's mtime is not the archive's: %v %v", st, err)
			}
		})
	}
}

// TestExtractOwner: a root worker gives the tree to the sandbox uid.
func TestExtractOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (to give files away); run it as root")
	}
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	data := tarOf(t, file("a/b/c.txt", "x"), sl("l", "a"), hl("h", "a/b/c.txt"), d("e"))
	if _, err := unpack.Extract(context.Background(), bytes.NewReader(data), root,
		unpack.Options{Chown: true, UID: 65534, GID: 65533}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "a/b", "a/b/c.txt", "l", "h", "e"} {
		st, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscallStat); s.Uid != 65534 || s.Gid != 65533 {
			t.Errorf("%s owned by %d:%d", p, s.Uid, s.Gid)
		}
	}
}

// TestExtractCancel: a cancelled context stops the extraction.
func TestExtractCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := unpack.Extract(ctx, bytes.NewReader(tarOf(t, file("a", "x"))), root, unpack.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestExtractLinksAsIs: a checkpoint's links keep their targets, an
// absolute one or one climbing out too, and are never written through.
func TestExtractLinksAsIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"kept", tarOf(t, sl("python", "/usr/bin/python3"), d("a"), sl("a/up", "../../x"), file("f", "x")), nil},
		{"not through one", tarOf(t, sl("l", "/tmp"), file("l/x", "evil")), unpack.ErrUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			root, err := os.OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			_, err = unpack.Extract(t.Context(), bytes.NewReader(tc.data), root, unpack.Options{LinksAsIs: true})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			for name, want := range map[string]string{"python": "/usr/bin/python3", "a/up": "../../x"} {
				if got, err := os.Readlink(filepath.Join(ws, name)); err != nil || got != want {
					t.Errorf("%s: %q, %v; want %q", name, got, err, want)
				}
			}
		})
	}
}
