package testenv

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NPMInstall copies files (package.json, package-lock.json and the files
// or directories named beside them) from src into a directory and
// installs the lock's packages there with `npm ci` (the npm registry, a
// few seconds), once per lock: into the directory the environment
// variable keep names, which keeps them between runs, else into a
// temporary one. It returns the directory and node's path, and fails,
// saying what to install, when Node.js or npm is missing: tests run the
// real packages, never our reading of them.
func NPMInstall(t testing.TB, src, keep string, files ...string) (dir, node string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Fatal("this test runs npm packages: it needs Node.js 18+ and npm (apt-get install nodejs npm)")
	}
	dir = os.Getenv(keep)
	if dir == "" {
		dir = t.TempDir()
	}
	for _, name := range append([]string{"package.json", "package-lock.json"}, files...) {
		// A directory kept from an earlier run is replaced whole.
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if err := copyTree(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// npm ci again only when the lock changed since the last install.
	lock, _ := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	stamp := filepath.Join(dir, "node_modules", ".baton-lock")
	if installed, err := os.ReadFile(stamp); err == nil && bytes.Equal(installed, lock) {
		return dir, node
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("npm ci of %s did not end within 5 min (it needs the npm registry):\n%s", src, out)
		}
		t.Fatalf("npm ci of %s (needs the npm registry): %v\n%s", src, err, out)
	}
	if err := os.WriteFile(stamp, lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, node
}

// copyTree copies the file or directory src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
