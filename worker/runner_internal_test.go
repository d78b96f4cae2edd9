package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
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

// TestAlignRefusesANewerEpoch: a holder whose chain already carries a
// later epoch was superseded; align must not write "attached" on top of
// it (found by the chaos soak: a takeover that lost its lease re-read the
// tip after being fenced and published on top of its successor's chain).
func TestAlignRefusesANewerEpoch(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx := t.Context()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(nc, config.Default(), WithStateDir(t.TempDir()), WithNode("n"))
	if err != nil {
		t.Fatal(err)
	}
	lv, err := lease.Live(ctx, js, kv.NewStore[kv.LeaseRecord](res.Leases), lease.Holder{Worker: "old", Node: "n"}, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lv.Close(context.Background()) })
	l, err := lv.Acquire(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	newer := publisher.NewChain(js, names, "r1", 0, publisher.WithEpoch(l.Epoch()+100))
	if err := newer.PublishStatus(ctx, protocol.Status{Status: protocol.StatusAttached, Offset: 10}); err != nil {
		t.Fatal(err)
	}
	dir, err := runDir(w.stateDir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	r := &run{id: "r1", dir: dir, lease: l}
	if _, err := w.align(ctx, r); !errors.Is(err, errSuperseded) {
		t.Fatalf("align under a newer epoch: %v, want errSuperseded", err)
	}
	if pos, err := publisher.Align(ctx, js, names, "r1"); err != nil || pos.Seq != newer.LastSeq() {
		t.Fatalf("the chain moved: %+v, %v", pos, err)
	}
}

// TestRunDirRefusesInvalidIDs: no run id from NATS names a path other than
// one directory under <state>/runs.
func TestRunDirRefusesInvalidIDs(t *testing.T) {
	for _, id := range []string{"", ".", "..", "a/b", "r1/workspace", "../r1", "a.b", "a b", "r1\x00", strings.Repeat("a", 129)} {
		if dir, err := runDir("/state", id); !errors.Is(err, errInvalidRunID) || dir != "" {
			t.Errorf("runDir(%q) = %q, %v; want errInvalidRunID", id, dir, err)
		}
	}
	if dir, err := runDir("/state", "run_1-A"); err != nil || dir != "/state/runs/run_1-A" {
		t.Errorf("runDir(run_1-A) = %q, %v", dir, err)
	}
}
