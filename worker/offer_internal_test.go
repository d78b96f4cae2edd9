package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
)

// TestOfferAgainAfterTheLeaseChanged: a run handed off, taken over and
// handed off again within one scan window must be offered again. The
// scan's attach job ID was the run and window only, so JetStream dropped
// the second offer as a duplicate and the run stayed released until the
// next window (found by the chaos suite: an interactive run re-attached a
// second late, after its hand-off's own attach job was lost).
func TestOfferAgainAfterTheLeaseChanged(t *testing.T) {
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
	w.leases, w.runs = kv.NewStore[kv.LeaseRecord](res.Leases), kv.NewStore[kv.RunRecord](res.Runs)
	if w.live, err = lease.Live(ctx, js, w.leases, lease.Holder{Worker: w.id, Node: "n"}, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.live.Close(context.Background()) })
	const id = "r1"
	rc := w.newRecovery(func(context.Context, string) {})
	dir, err := runDir(w.stateDir, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(string(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := w.runs.Create(ctx, id, kv.RunRecord{RunID: id, State: kv.RunRunning, Node: "n"}); err != nil {
		t.Fatal(err)
	}
	handOff := func(holder string) {
		t.Helper()
		lv, err := lease.Live(ctx, js, w.leases, lease.Holder{Worker: holder, Node: "n"}, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lv.Close(ctx) }()
		l, err := lv.Acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	subject := names.AttachJobSubject("n")
	offered := func() uint64 {
		t.Helper()
		st, err := js.Stream(ctx, names.JobsStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	const scanID = "attach:r1:scan:7" // one window
	handOff("w1")
	rc.offer(ctx, id, scanID)
	rc.offer(ctx, id, scanID) // another worker's scan of the same window
	if n := offered(); n != 1 {
		t.Fatalf("%d attach jobs after two scans of one hand-off, want 1", n)
	}
	handOff("w2")
	rc.offer(ctx, id, scanID)
	if n := offered(); n != 2 {
		t.Fatalf("%d attach jobs after a second hand-off in the same window, want 2", n)
	}
}

// TestScanSpawnsNothingForHeldRuns: a scan skips the runs this worker
// holds in its own goroutine. It offered each from a goroutine of its own,
// so a worker holding 200 idle runs woke about 190 goroutines every scan
// (TTL/2), most of what it did while idle.
func TestScanSpawnsNothingForHeldRuns(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		if err := os.MkdirAll(filepath.Join(dir, "runs", fmt.Sprintf("held-%d", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var asked, spawned atomic.Int32
	rc := &recovery{stateDir: dir, log: zerolog.Nop(), held: func(string) bool {
		asked.Add(1)
		// Asked from a goroutine the scan started, its stack holds the
		// scan's closure.
		buf := make([]byte, 8<<10)
		if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*recovery).scan.func") {
			spawned.Add(1)
		}
		return true
	}}
	rc.scan(t.Context(), "t")
	if asked.Load() != 20 {
		t.Fatalf("held asked %d times for 20 run directories", asked.Load())
	}
	if n := spawned.Load(); n > 0 {
		t.Fatalf("%d of 20 held runs looked at from a goroutine of their own", n)
	}
}
