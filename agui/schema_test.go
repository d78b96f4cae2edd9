package agui_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
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
	dir, node := testenv.NPMInstall(t, filepath.Join("testdata", "agui-schema"), "BATON_AGUI_NPM_DIR", "check.mjs")
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
