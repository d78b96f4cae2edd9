package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/internal/testenv"
)

func newStore(t *testing.T) jetstream.ObjectStore {
	t.Helper()
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "BATON_CHECKPOINTS"})
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newTree makes an empty workspace and home.
func newTree(t *testing.T) checkpoint.Tree {
	t.Helper()
	dir := t.TempDir()
	tr := checkpoint.Tree{Workspace: filepath.Join(dir, "workspace"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{tr.Workspace, tr.Home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func write(t *testing.T, root, rel, body string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// listing is a tree as a person would compare it: each path's kind,
// permissions and content or target.
func listing(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case st.Mode().IsDir():
			out[rel] = fmt.Sprintf("dir %v", st.Mode().Perm())
		case st.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case st.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %v %s", st.Mode().Perm(), b)
		default:
			out[rel] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// restore restores object into a fresh tree and returns it.
func restore(t *testing.T, obs jetstream.ObjectStore, object string) (checkpoint.Tree, *checkpoint.Manifest, error) {
	t.Helper()
	tr := newTree(t)
	ws, err := os.OpenRoot(tr.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	home, err := os.OpenRoot(tr.Home)
	if err != nil {
		t.Fatal(err)
	}
	defer home.Close()
	m, err := checkpoint.Restore(ctxT(t), obs, object, checkpoint.Dest{Workspace: ws, Home: home})
	return tr, m, err
}

func sameTrees(t *testing.T, what string, got, want checkpoint.Tree) {
	t.Helper()
	for _, r := range [][2]string{{got.Workspace, want.Workspace}, {got.Home, want.Home}} {
		g, w := listing(t, r[0]), listing(t, r[1])
		if !maps.Equal(g, w) {
			for _, k := range slices.Sorted(maps.Keys(w)) {
				if g[k] != w[k] {
					t.Errorf("%s: %q is %q, want %q", what, k, g[k], w[k])
				}
			}
			for k := range g {
				if _, ok := w[k]; !ok {
					t.Errorf("%s: %q is there (%q) and should not be", what, k, g[k])
				}
			}
		}
	}
}

// TestRoundTrip: a base, then changes of every kind as deltas, each
// restored into an empty tree equal to the tree it was taken of, and the
// chain made a base again at its bound.
func TestRoundTrip(t *testing.T) {
	obs := newStore(t)
	tr := newTree(t)
	write(t, tr.Workspace, "README.md", "hello\n", 0o644)
	write(t, tr.Workspace, "bin/run", "#!/bin/sh\necho hi\n", 0o755)
	write(t, tr.Workspace, "src/deep/er/main.go", "package main\n", 0o644)
	write(t, tr.Workspace, "caf\xe9.txt", "latin-1 name\n", 0o600)
	write(t, tr.Workspace, "empty", "", 0o644)
	write(t, tr.Workspace, "old/x", "x", 0o644)
	write(t, tr.Home, ".claude/projects/-workspace/session.jsonl", `{"type":"user"}`+"\n", 0o600)
	write(t, tr.Home, ".claude.json", "{}", 0o644)
	if err := os.Symlink("/usr/bin/python3", filepath.Join(tr.Workspace, "python")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../README.md", filepath.Join(tr.Workspace, "src", "readme")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tr.Workspace, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tr.Workspace, "src", "deep"), 0o700); err != nil {
		t.Fatal(err)
	}

	m, x, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r1", Object: checkpoint.Name("s", "r1")})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Full() || m.Files != 8 || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], `"workspace/fifo" skipped`) {
		t.Fatalf("base: full %v, %d files, notes %q", m.Full(), m.Files, m.Notes)
	}
	os.Remove(filepath.Join(tr.Workspace, "fifo"))
	got, _, err := restore(t, obs, m.Object)
	if err != nil {
		t.Fatal(err)
	}
	sameTrees(t, "the base", got, tr)

	// Every kind of change, one checkpoint each.
	changesOf := []func(){
		func() { write(t, tr.Workspace, "README.md", "hello, world\n", 0o644) },
		func() { os.RemoveAll(filepath.Join(tr.Workspace, "old")) },
		func() {
			os.Remove(filepath.Join(tr.Workspace, "empty"))
			write(t, tr.Workspace, "empty/now-a-dir", "y", 0o644)
		},
		func() { os.Chmod(filepath.Join(tr.Workspace, "bin", "run"), 0o700) },
		func() {
			os.Remove(filepath.Join(tr.Workspace, "src", "readme"))
			os.Symlink("deep", filepath.Join(tr.Workspace, "src", "readme"))
		},
		func() {
			write(t, tr.Home, ".claude/projects/-workspace/session.jsonl", `{"type":"user"}`+"\n"+`{"type":"assistant"}`+"\n", 0o600)
		},
		func() {}, // nothing changed
	}
	parent, index := m, x
	for i, change := range changesOf {
		change()
		run := fmt.Sprintf("r%d", i+2)
		m, x, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: run, Object: checkpoint.Name("s", run), Parent: parent, Index: index})
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i+2, err)
		}
		if m.Full() || len(m.Chain) != i+2 {
			t.Fatalf("checkpoint %d: chain %q, want a delta on the last", i+2, m.Chain)
		}
		got, _, err := restore(t, obs, m.Object)
		if err != nil {
			t.Fatalf("restore %d: %v", i+2, err)
		}
		sameTrees(t, fmt.Sprintf("checkpoint %d", i+2), got, tr)
		parent, index = m, x
	}
	if len(parent.Entries) != 0 || len(parent.Deleted) != 0 || parent.Bytes != 0 {
		t.Errorf("a checkpoint of nothing changed holds %q, deletes %q", parent.Entries, parent.Deleted)
	}
	// The chain is at its bound: the next is a base.
	write(t, tr.Workspace, "README.md", "again\n", 0o644)
	m, _, err = checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r9", Object: checkpoint.Name("s", "r9"), Parent: parent, Index: index})
	if err != nil || !m.Full() {
		t.Fatalf("past the chain's bound: full %v, %v", m != nil && m.Full(), err)
	}
	got, _, err = restore(t, obs, m.Object)
	if err != nil {
		t.Fatal(err)
	}
	sameTrees(t, "the new base", got, tr)
}

// TestOneFileChange: a one-file change to a large tree stores that file,
// and only it is read.
func TestOneFileChange(t *testing.T) {
	obs := newStore(t)
	tr := newTree(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for i := range 40 {
		write(t, tr.Workspace, fmt.Sprintf("data/%02d.bin", i), string(body), 0o644)
	}
	m, x, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r1", Object: checkpoint.Name("s", "r1")})
	if err != nil {
		t.Fatal(err)
	}
	write(t, tr.Workspace, "data/07.bin", "small now", 0o644)
	m2, _, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r2", Object: checkpoint.Name("s", "r2"), Parent: m, Index: x})
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctxT(t), m2.Object)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("base %d bytes; after a one-file change %d bytes stored (%d in the tar)", m.Bytes, m2.Bytes, info.Size)
	if m2.Bytes != 9 || info.Size > 8<<10 || slices.Compare(m2.Entries, []string{"workspace/data/07.bin"}) != 0 {
		t.Fatalf("delta holds %q, %d bytes, object of %d bytes", m2.Entries, m2.Bytes, info.Size)
	}
	got, _, err := restore(t, obs, m2.Object)
	if err != nil {
		t.Fatal(err)
	}
	sameTrees(t, "after one change", got, tr)
}

func TestLimitsAndExclude(t *testing.T) {
	obs := newStore(t)
	tr := newTree(t)
	write(t, tr.Workspace, "a.txt", strings.Repeat("a", 1000), 0o644)
	write(t, tr.Workspace, "node_modules/x/index.js", "module", 0o644)
	write(t, tr.Workspace, "src/node_modules/y", "nested", 0o644)
	write(t, tr.Home, ".cache/big", strings.Repeat("c", 5000), 0o644)
	write(t, tr.Home, ".claude.json", "{}", 0o644)

	over := tr
	over.MaxBytes = 5000
	if _, _, err := checkpoint.Write(ctxT(t), obs, over, checkpoint.Options{Session: "s", Run: "r1", Object: "s/r1"}); !errors.Is(err, checkpoint.ErrLimit) {
		t.Fatalf("over MaxBytes: %v", err)
	}
	if _, err := obs.GetInfo(ctxT(t), "s/r1"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("a checkpoint over a limit stored its object: %v", err)
	}
	many := tr
	many.MaxEntries = 4
	if _, _, err := checkpoint.Write(ctxT(t), obs, many, checkpoint.Options{Session: "s", Run: "r1", Object: "s/r1"}); !errors.Is(err, checkpoint.ErrLimit) {
		t.Fatalf("over MaxEntries: %v", err)
	}

	excl := tr
	excl.MaxBytes = 5000
	excl.Exclude = []string{"node_modules/**", "**/node_modules", "~/.cache/**"}
	m, _, err := checkpoint.Write(ctxT(t), obs, excl, checkpoint.Options{Session: "s", Run: "r1", Object: "s/r1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"workspace/a.txt", "workspace/src", "home/.claude.json"}; slices.Compare(m.Entries, want) != 0 {
		t.Fatalf("entries %q, want %q", m.Entries, want)
	}
}

// TestRestoreRefuses: a restore of a missing, broken or replaced chain
// fails and says why.
func TestRestoreRefuses(t *testing.T) {
	obs := newStore(t)
	tr := newTree(t)
	write(t, tr.Workspace, "a", "a", 0o644)
	write(t, tr.Workspace, "b", "b", 0o644)
	m, x, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r1", Object: "s/r1"})
	if err != nil {
		t.Fatal(err)
	}
	write(t, tr.Workspace, "a", "changed", 0o644)
	if _, _, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "s", Run: "r2", Object: "s/r2", Parent: m, Index: x}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restore(t, obs, "s/nosuch"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a missing head: %v", err)
	}
	// The base's data replaced by an object of the same name without b.
	os.Remove(filepath.Join(tr.Workspace, "b"))
	other, _, err := checkpoint.Write(ctxT(t), obs, tr, checkpoint.Options{Session: "t", Run: "r1", Object: "t/r1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := obs.Get(ctxT(t), other.Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctxT(t), jetstream.ObjectMeta{Name: "s/r1"}, r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, _, err := restore(t, obs, "s/r2"); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "hold 1 of the 2 paths") {
		t.Errorf("a base replaced: %v", err)
	}
	// A manifest that is not one.
	if _, err := obs.PutBytes(ctxT(t), checkpoint.ManifestName("s/r1"), []byte("not msgpack")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restore(t, obs, "s/r2"); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("a broken manifest in the chain: %v", err)
	}
	if err := obs.Delete(ctxT(t), "s/r1.manifest"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restore(t, obs, "s/r2"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a manifest gone from the chain: %v", err)
	}
}
