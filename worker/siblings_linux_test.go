package worker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
)

// siblingTTL is the lease TTL of the sibling tests: far longer than the
// recoveries they expect, so that none of them is the TTL's.
const siblingTTL = 15 * time.Second

// startWorkerProcess starts `baton worker` on h's server and state
// directory, node n1, and returns it; the test kills it.
func startWorkerProcess(t *testing.T, h *harness) *exec.Cmd {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	conf := fmt.Sprintf("leaseTTL: %s\nconcurrency: 4\nprofiles:\n  fake:\n    command: [\"{baton}\", fake-agent]\n    allowArgs: true\n", siblingTTL)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.BatonBinary(t), "worker", "--nats", h.s.ClientURL(), "--config", cfg,
		"--state-dir", h.stateDir, "--node", "n1", "--log-format", "json")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
	return cmd
}

// runOnProcess starts a long run and waits until the worker process holds it.
func runOnProcess(t *testing.T, h *harness, cmd *exec.Cmd) string {
	t.Helper()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "120", "--rate", "20"}})
	st := h.waitStatus(id, protocol.StatusStarted)
	if want := fmt.Sprintf("n1-%d-", cmd.Process.Pid); !strings.HasPrefix(st.Worker, want) {
		t.Fatalf("run started by %q, want the worker process (%s…)", st.Worker, want)
	}
	return id
}

// killAndTakeOver starts a sibling, SIGKILLs the worker process holding
// run id and wants the run attached well within the lease TTL: the
// sibling ends the dead one's liveness, not its expiry. whose names the
// killed worker in the message.
func killAndTakeOver(t *testing.T, h *harness, cmd *exec.Cmd, id, whose string) protocol.Status {
	t.Helper()
	h.addWorker("w2")
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	st := h.waitStatus(id, protocol.StatusAttached)
	if took := time.Since(killed); took > siblingTTL/3 {
		t.Errorf("run attached %v after the SIGKILL of %s, want well within the lease TTL %v", took, whose, siblingTTL)
	} else {
		t.Logf("run attached by %s %v after its worker's SIGKILL (lease TTL %v)", st.Worker, took.Round(time.Millisecond), siblingTTL)
	}
	return st
}

// TestSiblingDeathEndsItsLiveness: a worker of the node that sees another
// one's process exit without ending its liveness (SIGKILL) ends it, and
// the dead worker's run is taken over within a second or two, not a lease
// TTL later; the run's events still equal its journal.
func TestSiblingDeathEndsItsLiveness(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.LeaseTTL = siblingTTL }))
	h.stopWorker("w1") // the worker process takes the run
	cmd := startWorkerProcess(t, h)
	id := runOnProcess(t, h, cmd)
	st := killAndTakeOver(t, h, cmd, id, "its worker")
	msgs := h.chain(id, 60*time.Second)
	h.assertChainMatchesJournal(id, msgs)
	if _, err := os.Stat(filepath.Join(h.stateDir, "workers", st.Worker+".json")); err != nil {
		t.Errorf("the live worker's record: %v", err)
	}
}

// TestRestartedWorkerEndsDeadLiveness: a worker that starts on a node
// whose worker was killed (no other worker there) ends the dead one's
// liveness at its start, instead of waiting out its TTL.
func TestRestartedWorkerEndsDeadLiveness(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.LeaseTTL = siblingTTL }))
	h.stopWorker("w1")
	cmd := startWorkerProcess(t, h)
	id := runOnProcess(t, h, cmd)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	restarted := time.Now()
	h.addWorker("w2")
	h.waitStatus(id, protocol.StatusAttached)
	if took := time.Since(restarted); took > siblingTTL/3 {
		t.Errorf("run attached %v after a worker started beside its dead one's record, want well within the lease TTL %v", took, siblingTTL)
	}
	h.assertChainMatchesJournal(id, h.chain(id, 60*time.Second))
	if dirs, _ := filepath.Glob(filepath.Join(h.stateDir, "workers", fmt.Sprintf("n1-%d-*", cmd.Process.Pid))); len(dirs) > 0 {
		t.Errorf("the dead worker's record stays: %v", dirs)
	}
}

// TestSiblingDeathAfterNewSession: a worker whose liveness session was
// lost and opened again (its key written by another, as after an outage
// longer than its renewals) is still ended at once by a sibling when its
// process dies: its record names the session it holds now, not its first.
// Found by the chaos suite's traced recoveries, where a sibling ready all
// through took a lease TTL after NATS restarts, not a fraction of a second.
func TestSiblingDeathAfterNewSession(t *testing.T) {
	h := newHarness(t, withConfig(func(c *config.Config) { c.LeaseTTL = siblingTTL }))
	h.stopWorker("w1") // the worker process takes the run
	cmd := startWorkerProcess(t, h)
	ctx := t.Context()
	leases, err := h.js.KeyValue(ctx, h.names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	live := kv.NewStore[kv.LiveRecord](leases)
	var key string
	var first kv.LiveRecord
	testenv.WaitFor(t, 30*time.Second, "the worker process's record and liveness key", func() bool {
		files, _ := filepath.Glob(filepath.Join(h.stateDir, "workers", fmt.Sprintf("n1-%d-*.json", cmd.Process.Pid)))
		if len(files) == 0 {
			return false
		}
		key = lease.LiveKey("n1", strings.TrimSuffix(filepath.Base(files[0]), ".json"))
		var err error
		first, _, err = live.Get(ctx, key)
		return err == nil
	})
	// The same value at a new revision: the process's next renewal finds
	// its revision gone, loses the session and opens another.
	e, err := leases.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Update(ctx, key, e.Value(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*siblingTTL, "the worker process to open a new liveness session", func() bool {
		cur, _, err := live.Get(ctx, key)
		return err == nil && cur.Session != first.Session
	})
	id := runOnProcess(t, h, cmd)
	killAndTakeOver(t, h, cmd, id, "its worker, whose session was its second")
}
