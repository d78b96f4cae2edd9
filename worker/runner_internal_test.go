package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
)

// TestRunnerChoice: the runner chain runs from baton-runner beside the
// baton binary when it is there and executable, else from baton; an
// explicit runner wins.
func TestRunnerChoice(t *testing.T) {
	s := testenv.RunServer(t)
	nc, _ := testenv.Connect(t, s)
	dir := t.TempDir()
	baton := filepath.Join(dir, "baton")
	runner := filepath.Join(dir, RunnerName)
	if err := os.WriteFile(baton, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	choose := func(opts ...Option) string {
		t.Helper()
		w, err := New(nc, config.Default(), append([]Option{WithStateDir(dir), WithNode("n"), WithBinary(baton)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return w.runner
	}
	if got := choose(); got != baton {
		t.Errorf("no runner beside: %s, want baton", got)
	}
	if err := os.WriteFile(runner, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := choose(); got != baton {
		t.Errorf("runner beside, not executable: %s, want baton", got)
	}
	if err := os.Chmod(runner, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := choose(); got != runner {
		t.Errorf("runner beside: %s, want it", got)
	}
	if got := choose(WithRunner("/opt/x/runner")); got != "/opt/x/runner" {
		t.Errorf("explicit runner: %s", got)
	}
}
