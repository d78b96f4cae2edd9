package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// poolEntries are the prestarted sandboxes in stateDir that wait for a
// take.
func poolEntries(t *testing.T, stateDir string) []journal.Dir {
	t.Helper()
	return sandbox.WaitingPoolEntries(filepath.Join(stateDir, "runs"))
}

// waitPool waits until worker w1 holds n prestarted sandboxes of profile
// ready for a take (not their records on disk, which say they wait a
// moment before the worker has them in hand).
func waitPool(t *testing.T, h *harness, profile string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready, err := worker.PoolWaiting(h.regs["w1"])
		if err != nil {
			t.Fatal(err)
		}
		if ready[profile] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker w1 holds %d prestarted sandboxes of %s after 30 s, want %d (%d wait on disk)", ready[profile], profile, n, len(poolEntries(t, h.stateDir)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// took reports whether run id took a prestarted sandbox.
func took(t *testing.T, h *harness, id string) bool {
	t.Helper()
	b, err := os.ReadFile(journal.Dir(filepath.Join(h.stateDir, "runs", id)).State())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), `"stage":"outer","phase":"take"`)
}

// TestPrestartedRuns: a profile's pool keeps its sandboxes started; runs
// take them, their published events equal their journals byte for byte,
// and the pool refills; a job that changes the sandbox starts cold; a
// stopping worker leaves no prestarted sandbox behind.
func TestPrestartedRuns(t *testing.T) {
	h := newHarness(t, func(_ *server.Options, c *config.Config) {
		c.Profiles["pooled"] = config.Profile{Command: []string{"{baton}", "fake-agent"}, AllowArgs: config.AnyArgs,
			Timeout: time.Minute, Pool: 2}
	})
	waitPool(t, h, "pooled", 2)
	for i := range 3 {
		id := newRunID(t)
		h.submit(map[string]any{"runId": id, "profile": "pooled", "input": "hello",
			// An output limit is the journal's, not the sandbox's: still pooled.
			"limits": map[string]string{"output": "1MiB"},
			"args":   []string{"--lines", "200", "--raw-every", "7", "--seed", "3", "--partial-last", "--forge-sentinel"}})
		msgs := h.chain(id, 60*time.Second)
		if n := h.assertChainMatchesJournal(id, msgs); n < 200 {
			t.Fatalf("run %d: only %d lines", i, n)
		}
		st := statuses(t, msgs)
		if st[0].Status != protocol.StatusStarted || st[len(st)-1].Status != protocol.StatusSucceeded {
			t.Fatalf("run %d: statuses %+v", i, st)
		}
		if !took(t, h, id) {
			t.Errorf("run %d started cold with %d prestarted sandboxes waiting", i, len(poolEntries(t, h.stateDir)))
		}
		waitPool(t, h, "pooled", 2)
	}
	cold := newRunID(t)
	h.submit(map[string]any{"runId": cold, "profile": "pooled", "limits": map[string]string{"disk": "32MiB"},
		"args": []string{"--lines", "3"}})
	if st := h.terminal(cold); st.Status != protocol.StatusSucceeded {
		t.Fatalf("cold run ended %s: %s", st.Status, st.Reason)
	}
	if took(t, h, cold) {
		t.Error("a run with its own disk limit took a prestarted sandbox")
	}
	if n := len(poolEntries(t, h.stateDir)); n != 2 {
		t.Errorf("%d prestarted sandboxes after a cold run, want the 2 it left", n)
	}
	h.stopWorker("w1")
	if dirs, _ := filepath.Glob(filepath.Join(h.stateDir, "runs", sandbox.PoolEntryPrefix+"*")); len(dirs) > 0 {
		t.Errorf("a stopped worker left its prestarted sandboxes: %v", dirs)
	}
}

// TestAdaptivePool: a profile without "pool" (config.PoolAuto) has no
// prestarted sandbox until its first run, which starts cold; its second
// run takes the one the worker prestarted after the first. A profile
// with "pool: 0" starts every run cold and gets none.
func TestAdaptivePool(t *testing.T) {
	h := newHarness(t, func(_ *server.Options, c *config.Config) {
		c.Profiles["auto"] = config.Profile{Command: []string{"{baton}", "fake-agent"}, AllowArgs: config.AnyArgs,
			Timeout: time.Minute, Pool: config.PoolAuto}
		c.Profiles["off"] = config.Profile{Command: []string{"{baton}", "fake-agent"}, AllowArgs: config.AnyArgs,
			Timeout: time.Minute, Pool: 0}
	})
	run := func(profile string) string {
		t.Helper()
		id := newRunID(t)
		h.submit(map[string]any{"runId": id, "profile": profile, "args": []string{"--lines", "3"}})
		if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
			t.Fatalf("%s run ended %s: %s", profile, st.Status, st.Reason)
		}
		return id
	}
	if n := len(poolEntries(t, h.stateDir)); n != 0 {
		t.Fatalf("%d prestarted sandboxes before any run, want none", n)
	}
	if id := run("off"); took(t, h, id) {
		t.Error("the first run of a pool: 0 profile took a prestarted sandbox")
	}
	if id := run("auto"); took(t, h, id) {
		t.Error("the first run of an unpooled profile took a prestarted sandbox")
	}
	// The auto profile's one sandbox: had the off profile, used first,
	// been given a pool, its sandbox would have been started by now too.
	waitPool(t, h, "auto", 1)
	if id := run("auto"); !took(t, h, id) {
		t.Errorf("the second run of an unpooled profile started cold with %d prestarted sandboxes waiting", len(poolEntries(t, h.stateDir)))
	}
	if id := run("off"); took(t, h, id) {
		t.Error("a run of a pool: 0 profile took a prestarted sandbox")
	}
	// Two auto runs within a minute: the pool grows to two.
	waitPool(t, h, "auto", 2)
	h.stopWorker("w1")
	if dirs, _ := filepath.Glob(filepath.Join(h.stateDir, "runs", sandbox.PoolEntryPrefix+"*")); len(dirs) > 0 {
		t.Errorf("a stopped worker left its prestarted sandboxes: %v", dirs)
	}
}
