package agui_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestAGUISchemas checks every golden stream against the official AG-UI
// packages, not our reading of them (testdata/agui-schema/check.mjs):
// each event parses with @ag-ui/core's EventSchema, and each stream
// passes @ag-ui/client's verifyEvents and builds messages with its
// defaultApplyEvents. It installs the packages of
// testdata/agui-schema/package-lock.json with `npm ci` (the npm
// registry, a few seconds) into a temporary directory, or into
// BATON_AGUI_NPM_DIR, which keeps them between runs.
func TestAGUISchemas(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Fatal("checking the events against @ag-ui/core needs Node.js 18+ and npm: apt-get install nodejs npm")
	}
	dir := os.Getenv("BATON_AGUI_NPM_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	src := filepath.Join("testdata", "agui-schema")
	for _, name := range []string{"package.json", "package-lock.json", "check.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// npm ci again only when the lock changed since the last install.
	lock, _ := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	stamp := filepath.Join(dir, "node_modules", ".baton-lock")
	if installed, err := os.ReadFile(stamp); err != nil || !bytes.Equal(installed, lock) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci of testdata/agui-schema (needs the npm registry): %v\n%s", err, out)
		}
		if err := os.WriteFile(stamp, lock, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.agui.ndjson"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden streams in testdata (%v)", err)
	}
	for i, f := range files {
		if files[i], err = filepath.Abs(f); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"check.mjs"}, files...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the official AG-UI packages refuse the projection: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
