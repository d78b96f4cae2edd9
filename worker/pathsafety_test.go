package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// withShell adds the profile "sh", whose job args are one shell script.
func withShell(c *config.Config) {
	c.Profiles["sh"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute}
}

// rootOnlyFiles makes a root-only directory with a secret file and a
// victim file, as the targets of a hostile agent's links.
func rootOnlyFiles(t *testing.T) (secret, victim string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test attacks a root worker: run it as root")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret, victim = filepath.Join(dir, "secret"), filepath.Join(dir, "victim")
	if err := os.WriteFile(secret, []byte("ROOT-ONLY-SECRET-"+newRunID(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("KEEP ME"), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret, victim
}

func runsStore(t *testing.T, h *harness) (*kv.Store[kv.RunRecord], *kv.Store[kv.LeaseRecord]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs, err := kv.Open[kv.RunRecord](ctx, h.js, h.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	leases, err := kv.Open[kv.LeaseRecord](ctx, h.js, h.names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	return runs, leases
}

// TestPlantedLinksInRecordKey is the attack of issue 13: a hostile run
// plants stderr.log and finished in its workspace as links to root's
// files, then a client writes a run record whose key names that
// workspace as a run ("<runId>/workspace", state running, node ghost).
// A restarted worker's reaper must refuse the key, say so, and neither
// publish the secret nor touch the other file; a lost run of the same
// ghost node with a valid key shows the reaper did its pass.
func TestPlantedLinksInRecordKey(t *testing.T) {
	secret, victim := rootOnlyFiles(t)
	h := newHarness(t, withConfig(func(c *config.Config) { c.LeaseTTL = time.Second; withShell(c) }))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "sh", "args": []string{
		fmt.Sprintf("ln -s %s stderr.log && ln -s %s finished && ln -s %s runner.lock", secret, victim, victim)}})
	if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
		t.Fatalf("hostile run ended %+v", st)
	}
	runs, _ := runsStore(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	index, err := h.js.KeyValue(ctx, h.names.NodeRunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	bad, witness := id+"/workspace", newRunID(t)
	for _, key := range []string{bad, witness} {
		if _, err := runs.Create(ctx, key, kv.RunRecord{RunID: strings.TrimSuffix(key, "/workspace"), State: kv.RunRunning, Node: "ghost", CreatedAt: time.Now()}); err != nil {
			t.Fatalf("client writes record %q: %v", key, err)
		}
		// The reaper finds a node's runs through the node index.
		if _, err := index.Put(ctx, protocol.NodeRunKey("ghost", key), nil); err != nil {
			t.Fatalf("write index entry of %q: %v", key, err)
		}
	}
	h.stopWorker("w1")
	var log testenv.Buffer
	h.addWorker("w2", worker.WithLogger(zerolog.New(&log)))
	if st := statuses(t, h.chain(witness, time.Minute)); st[len(st)-1].Status != protocol.StatusLost {
		t.Fatalf("witness run ended %+v, want lost", st[len(st)-1])
	}
	testenv.WaitFor(t, 10*time.Second, "the worker to log the refused key", func() bool {
		return strings.Contains(log.String(), bad)
	})
	if !strings.Contains(log.String(), "invalid run id") {
		t.Errorf("the log names the key but not why:\n%s", log.String())
	}
	// Nothing on any chain carries the secret, nor names the bad key.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := os.ReadFile(secret)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.js.Stream(ctx, h.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if bytes.Contains(m.Data, b) || strings.Contains(m.Subject, "/") {
			t.Errorf("message %d on %s: %q", seq, m.Subject, m.Data)
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "KEEP ME" {
		t.Errorf("the victim file now holds %q", got)
	}
	if rec, _, err := runs.Get(ctx, bad); err != nil || rec.State != kv.RunRunning {
		t.Errorf("the bad record was changed: %+v, %v", rec, err)
	}
}

// TestPlantedPIDFileSignalsNothing is the pid-file variant: a live run's
// agent writes another process's pid into runner.pid in its workspace
// and holds a lock on runner.lock there; a client marks
// "<runId>/workspace" lost on this node and releases its lease, which
// makes the worker offer that run. No signal may reach the process.
func TestPlantedPIDFileSignalsNothing(t *testing.T) {
	rootOnlyFiles(t)
	h := newHarness(t, withConfig(withShell))
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	died := make(chan error, 1)
	go func() { died <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-died })
	id := newRunID(t)
	dir := journal.Dir(filepath.Join(h.stateDir, "runs", id))
	t.Cleanup(func() { _ = sandbox.Cancel(dir) })
	h.submit(map[string]any{"runId": id, "profile": "sh", "args": []string{
		fmt.Sprintf("echo %d > runner.pid && exec flock runner.lock sleep 120", victim.Process.Pid)}})
	h.waitStatus(id, protocol.StatusStarted)
	planted := journal.Dir(dir.Workspace())
	testenv.WaitFor(t, 10*time.Second, "the agent to hold its planted lock", func() bool {
		alive, err := sandbox.Alive(planted)
		return err == nil && alive
	})
	var log testenv.Buffer
	h.addWorker("w2", worker.WithLogger(zerolog.New(&log)))
	runs, leases := runsStore(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bad := id + "/workspace"
	if _, err := runs.Create(ctx, bad, kv.RunRecord{RunID: id, State: kv.RunState(protocol.StatusLost), Node: "n1", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(ctx, bad, kv.LeaseRecord{Worker: "x", Node: "n1", Epoch: 1, State: kv.LeaseReleased}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the worker to refuse the key (or the victim to die)", func() bool {
		select {
		case err := <-died:
			died <- err
			return true
		default:
		}
		return strings.Contains(log.String(), bad)
	})
	select {
	case err := <-died:
		died <- err
		t.Fatalf("the process named by the planted pid died: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if alive, err := sandbox.Alive(dir); err != nil || !alive {
		t.Fatalf("the run's own runner: alive %v, %v", alive, err)
	}
}

// TestStateDirUnderPrivateDir is the finding of 2026-12-01: a root
// worker whose state dir lies under a 0700 directory runs a {baton}
// profile. The sandbox uid cannot reach the binary bound into the
// sandbox: the run ends failed, its status naming the setup phase and the
// cause, instead of the init's crash.
func TestStateDirUnderPrivateDir(t *testing.T) {
	rootOnlyFiles(t)
	h := newHarness(t)
	h.stopWorker("w1")
	priv := t.TempDir() // 0700
	testenv.ReleaseMountsUnder(t, priv)
	h.stateDir = filepath.Join(priv, "state")
	h.addWorker("w2")
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "fake", "args": []string{"--lines", "1"}})
	st := statuses(t, h.chain(id, time.Minute))
	last := st[len(st)-1]
	if last.Status != protocol.StatusFailed {
		t.Fatalf("terminal %+v, want failed", last)
	}
	for _, want := range []string{"sandbox setup (host-sources)", "permission denied", "--state-dir"} {
		if !strings.Contains(last.Reason, want) {
			t.Errorf("reason %q does not say %q", last.Reason, want)
		}
	}
	if strings.Contains(last.StderrTail, "panic") {
		t.Errorf("the runner chain panicked:\n%s", last.StderrTail)
	}
}
