package worker

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
)

// TestSiblingEndsTheSessionItsRecordNamesNow: a sibling watched since its
// first session, which then opened another (its record rewritten), is
// ended in the session it held when its process died. The watch ended the
// session it had read at its start, which was gone, and left the key to
// its TTL.
func TestSiblingEndsTheSessionItsRecordNamesNow(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx := t.Context()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(nc, config.Default(), WithStateDir(t.TempDir()), WithNode("n"), WithID("n-live"))
	if err != nil {
		t.Fatal(err)
	}
	w.leases = kv.NewStore[kv.LeaseRecord](res.Leases)
	if w.live, err = lease.Live(ctx, js, w.leases, lease.Holder{Worker: w.id, Node: "n"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The dead-to-be sibling: a process, its record and its liveness key.
	proc := exec.Command("sleep", "60")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	start, err := procStart(proc.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := pidNamespace()
	if err != nil {
		t.Fatal(err)
	}
	const dead = "n-dead"
	live := kv.NewStore[kv.LiveRecord](res.Leases)
	key := lease.LiveKey("n", dead)
	record := func(session uint64) {
		t.Helper()
		b, err := json.Marshal(workerRecord{Worker: dead, Node: "n", Session: session, PID: proc.Process.Pid, Start: start, PIDNS: ns})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(workersDir(w.stateDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(workersDir(w.stateDir), dead+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		val := kv.LiveRecord{Worker: dead, Node: "n", Session: session}
		if _, err := live.Create(ctx, key, val); errors.Is(err, kv.ErrExists) {
			_, _, err = live.Modify(ctx, key, func(r *kv.LiveRecord) error { *r = val; return nil })
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	record(1)
	sb := w.newSiblings()
	sb.watch(ctx, dead)
	record(2) // its second session
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the dead sibling's liveness key to be deleted", func() bool {
		_, _, err := live.Get(ctx, key)
		return errors.Is(err, kv.ErrNotFound)
	})
}
