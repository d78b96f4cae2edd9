package outputs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/outputs"
)

// A tree baseline (a seeded archive): unchanged files, links and modes are
// not in the diff; changed, deleted and new ones are, with their modes; and
// the patch applied to a copy of the baseline gives the workspace back.
func TestCaptureTreeBaseline(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed to check the patch applies: apt-get install git")
	}
	obs := newStore(t)
	seed := func(dir string) {
		write(t, dir, "README.md", "one\ntwo\nthree\n")
		write(t, dir, "same.txt", strings.Repeat("unchanged\n", 20_000)) // larger than a compare block
		write(t, dir, "big.txt", strings.Repeat("x", 100_000)+"\n")
		write(t, dir, "run.sh", "#!/bin/sh\necho hi\n")
		write(t, dir, "gone.sh", "#!/bin/sh\n")
		write(t, dir, "src/keep.go", "package src\n")
		for _, p := range []string{"run.sh", "gone.sh"} {
			if err := os.Chmod(filepath.Join(dir, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for link, target := range map[string]string{"latest": "src/keep.go", "old-link": "README.md", "moved": "README.md"} {
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
		}
	}
	baseDir, ws := t.TempDir(), t.TempDir()
	seed(baseDir)
	seed(ws)
	write(t, ws, "README.md", "one\n2\nthree\n")
	write(t, ws, "big.txt", strings.Repeat("x", 100_000)+"y\n") // same size+1: compared whole
	write(t, ws, "new.txt", "new\n")
	for _, p := range []string{"gone.sh", "old-link", "moved"} {
		if err := os.Remove(filepath.Join(ws, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src", filepath.Join(ws, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := outputs.Capture(ctx, obs, "tree", ws, outputs.TreeBaseline(root), outputs.Policy{Diff: true})
	if err != nil || res.Error != "" {
		t.Fatalf("capture: %v %q", err, res.Error)
	}
	patch := string(get(t, obs, "tree/diff.patch"))
	for _, want := range []string{
		"-two\n+2\n",
		"diff --git a/gone.sh b/gone.sh\ndeleted file mode 100755\n",
		"diff --git a/old-link b/old-link\ndeleted file mode 120000\n",
		"diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100644\n",
		"+++ b/new.txt",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	for _, unchanged := range []string{"same.txt", "src/keep.go", "a/latest"} {
		if strings.Contains(patch, unchanged) {
			t.Errorf("patch shows the unchanged %s:\n%s", unchanged, patch)
		}
	}
	cmd := exec.Command(git, "apply", "-v", "-")
	cmd.Dir, cmd.Stdin = baseDir, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, patch)
	}
	for _, rel := range []string{"README.md", "big.txt", "new.txt", "same.txt"} {
		want, _ := os.ReadFile(filepath.Join(ws, rel))
		got, err := os.ReadFile(filepath.Join(baseDir, rel))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s after apply differs (%v)", rel, err)
		}
	}
	for _, gone := range []string{"gone.sh", "old-link"} {
		if _, err := os.Lstat(filepath.Join(baseDir, gone)); err == nil {
			t.Errorf("%s still there after apply", gone)
		}
	}
	if target, err := os.Readlink(filepath.Join(baseDir, "moved")); err != nil || target != "src" {
		t.Errorf("moved after apply: %q %v", target, err)
	}
	if st, err := os.Stat(filepath.Join(baseDir, "run.sh")); err != nil || st.Mode()&0o111 != 0 {
		t.Errorf("run.sh after apply: %v %v", st.Mode(), err)
	}
}
