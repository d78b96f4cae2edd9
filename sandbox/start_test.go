package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/batonhq/baton/journal"
)

func TestPrepareRunDir(t *testing.T) {
	spec := validSpec()
	spec.RunDir = filepath.Join(t.TempDir(), "runs", "run-1")
	spec.Files = map[string]string{"a.txt": "A", "dir/sub/b.txt": "B"}
	dir := journal.Dir(spec.RunDir)
	// As an unprivileged worker: no chown.
	made, err := prepareRunDir(t.Context(), dir, spec, []byte("input"), 1000, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	made.Close()
	modes := map[string]os.FileMode{
		string(dir):                             0o700 | os.ModeDir,
		dir.Workspace():                         0o700 | os.ModeDir,
		dir.Spec():                              0o600,
		dir.Input():                             0o600,
		filepath.Join(dir.Workspace(), "a.txt"): 0o644,
		filepath.Join(dir.Workspace(), "dir/sub"):       0o755 | os.ModeDir,
		filepath.Join(dir.Workspace(), "dir/sub/b.txt"): 0o644,
	}
	for p, want := range modes {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir.Workspace(), "dir/sub/b.txt")); string(b) != "B" {
		t.Errorf("seed file holds %q", b)
	}
	if b, _ := os.ReadFile(dir.Input()); string(b) != "input" {
		t.Errorf("input holds %q", b)
	}
	b, _ := os.ReadFile(dir.Spec())
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back.Nonce != spec.Nonce || back.RunDir != spec.RunDir {
		t.Errorf("spec file %s: %v", b, err)
	}
	if _, err := prepareRunDir(t.Context(), dir, spec, nil, 1000, 1000, nil); !errors.Is(err, ErrRunExists) {
		t.Errorf("second prepareRunDir = %v, want ErrRunExists", err)
	}
}

func TestPrepareRunDirCleansUpOnFailure(t *testing.T) {
	spec := validSpec()
	spec.RunDir = filepath.Join(t.TempDir(), "runs", "run-1")
	// "a" is a file, so "a/b" cannot be written.
	spec.Files = map[string]string{"a": "file", "a/b": "under a file"}
	_, err := prepareRunDir(t.Context(), journal.Dir(spec.RunDir), spec, nil, 1000, 1000, nil)
	if err == nil {
		t.Fatal("prepareRunDir with conflicting seed files succeeded")
	}
	if _, serr := os.Stat(spec.RunDir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("failed prepareRunDir (%v) left the run directory: %v", err, serr)
	}
}

// TestRemoveRunDirLeavesAnotherStartsDirectory: a start that failed late
// (its worker lost the run while preparing) removes its directory only if
// it is still the one it made, not the one a worker that took the run over
// laid out anew at the same path.
func TestRemoveRunDirLeavesAnotherStartsDirectory(t *testing.T) {
	spec := validSpec()
	spec.RunDir = filepath.Join(t.TempDir(), "runs", "run-1")
	dir := journal.Dir(spec.RunDir)
	first, err := prepareRunDir(t.Context(), dir, spec, nil, 1000, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(spec.RunDir); err != nil {
		t.Fatal(err)
	}
	second, err := prepareRunDir(t.Context(), dir, spec, []byte("second"), 1000, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	defer second.Close()
	removeRunDir(dir, first)
	if _, err := os.Stat(dir.Spec()); err != nil {
		t.Fatalf("the first start removed the second's directory: %v", err)
	}
	removeRunDir(dir, second)
	if _, err := os.Lstat(spec.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the second start did not remove its own directory: %v", err)
	}
}
