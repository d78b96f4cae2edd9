package worker

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/outputs"
)

// gitWorkspace is a shallow clone of a commit with a file, an executable,
// a link and a subdirectory, as the exec stage leaves a workspace, and
// that commit.
func gitWorkspace(t *testing.T) (ws, commit string) {
	t.Helper()
	dir := t.TempDir()
	git := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
		cmd.Dir, cmd.Env = wd, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := filepath.Join(dir, "src")
	git(dir, "init", "-q", "src")
	for name, content := range map[string]string{"README.md": "hello\n", "bin/run.sh": "#!/bin/sh\n", "docs/a/b.txt": "deep\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "bin/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("README.md", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	git(src, "add", ".")
	git(src, "commit", "-q", "-m", "one")
	ws = filepath.Join(dir, "ws")
	git(dir, "clone", "-q", "--depth=1", "file://"+src, "ws")
	return ws, git(ws, "rev-parse", "HEAD")
}

// TestGitTree lays out the cloned commit's tree from the workspace's
// objects, and fails when the agent changed what the commit names.
func TestGitTree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	layout := func(ws, commit string, max int64) (string, error) {
		base := t.TempDir()
		root, err := os.OpenRoot(base)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		return base, gitTree(ctx, ws, filepath.Join(t.TempDir(), "scratch"), commit, root, max)
	}

	ws, commit := gitWorkspace(t)
	// The agent's work after the clone: none of it is the baseline.
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := layout(ws, commit, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"README.md": "hello\n", "bin/run.sh": "#!/bin/sh\n", "docs/a/b.txt": "deep\n"} {
		if b, err := os.ReadFile(filepath.Join(base, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(base, "bin/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("bin/run.sh is not executable: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(base, "link")); err != nil || l != "README.md" {
		t.Errorf("link: %q, %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(base, ".git")); err == nil {
		t.Error("the baseline holds .git")
	}

	// Over the workspace's limit.
	if _, err := layout(ws, commit, 8); !errors.Is(err, outputs.ErrLimit) {
		t.Errorf("a tree over the limit: %v", err)
	}

	// The agent rewrote an object: README.md's blob, unpacked, holds
	// other content under its id.
	ws2, commit2 := gitWorkspace(t)
	forge(t, ws2, "HEAD:README.md", "evil\n")
	if _, err := layout(ws2, commit2, 1<<20); !errors.Is(err, errAlteredRepo) {
		t.Errorf("a forged object: %v", err)
	}
	other, _ := gitWorkspace(t)
	// The commit's id, served by another repository's objects: alternates.
	if err := os.WriteFile(filepath.Join(ws2, ".git", "objects", "info", "alternates"), []byte(filepath.Join(other, ".git", "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := layout(ws2, commit2, 1<<20); !errors.Is(err, errAlteredRepo) {
		t.Errorf("alternates: %v", err)
	}
	if err := os.Remove(filepath.Join(ws2, ".git", "objects", "info", "alternates")); err != nil {
		t.Fatal(err)
	}
	// A commit the repository does not hold (the agent removed its
	// objects).
	if err := os.RemoveAll(filepath.Join(ws2, ".git", "objects")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws2, ".git", "objects", "pack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := layout(ws2, commit2, 1<<20); !errors.Is(err, errAlteredRepo) {
		t.Errorf("objects removed: %v", err)
	}
	// .git a link elsewhere.
	if err := os.RemoveAll(filepath.Join(ws2, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, ".git"), filepath.Join(ws2, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, err := layout(ws2, commit2, 1<<20); !errors.Is(err, errAlteredRepo) {
		t.Errorf(".git a link: %v", err)
	}
}

// forge unpacks ws's objects and replaces the object that rev names with
// a blob of content, under the same id.
func forge(t *testing.T, ws, rev, content string) {
	t.Helper()
	run := func(stdin *os.File, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Stdin = ws, stdin
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + ws, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id := run(nil, "rev-parse", rev)
	packs, _ := filepath.Glob(filepath.Join(ws, ".git", "objects", "pack", "pack-*"))
	moved := t.TempDir()
	for _, p := range packs {
		if err := os.Rename(p, filepath.Join(moved, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	others, _ := filepath.Glob(filepath.Join(moved, "*.pack"))
	for _, p := range others {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		run(f, "unpack-objects", "-q")
		f.Close()
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	fmt.Fprintf(zw, "blob %d\x00%s", len(content), content)
	zw.Close()
	loose := filepath.Join(ws, ".git", "objects", id[:2], id[2:])
	if err := os.Remove(loose); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose, z.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
}
