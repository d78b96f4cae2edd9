package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
)

// The spawning mark's outcome must be known to the worker that writes it:
// a mark left on the record without a runner loses the run (the chaos soak
// seed 1795986305644412220 lost run chaos-12220-49 that way: the worker
// was stopped during the write, which was applied, saw "context
// canceled", spawned nothing and removed the run directory; the
// redelivered job's worker then left the run to a node that had nothing).
func TestMarkSpawningOutcomeIsKnown(t *testing.T) {
	_, js := testenv.Connect(t, testenv.RunServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "RUNS"})
	if err != nil {
		t.Fatal(err)
	}
	runs := kv.NewStore[kv.RunRecord](bucket)
	create := func(id string, rec kv.RunRecord) uint64 {
		t.Helper()
		rev, err := runs.Create(ctx, id, rec)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	ours := kv.RunRecord{State: kv.RunStarting, Node: "A", Worker: "A-1-x"}

	t.Run("worker stopping", func(t *testing.T) {
		rev := create("stopping", ours)
		stopped, stop := context.WithCancel(ctx)
		stop()
		got, _, err := markSpawning(stopped, js, runs, "stopping", ours, rev)
		if err != nil || !got.Spawning {
			t.Fatalf("mark of a stopping worker: %+v, %v; want it written and known", got, err)
		}
	})
	t.Run("reply lost", func(t *testing.T) {
		rev := create("lost", ours)
		applied := ours
		applied.Spawning = true
		if _, err := runs.Update(ctx, "lost", applied, rev); err != nil {
			t.Fatal(err)
		}
		// The caller still holds rev: its write was applied, its reply lost.
		got, nrev, err := markSpawning(ctx, js, runs, "lost", ours, rev)
		if err != nil || !got.Spawning || nrev != rev+1 {
			t.Fatalf("mark whose first write was applied: %+v rev %d, %v; want ours at rev %d", got, nrev, err, rev+1)
		}
	})
	t.Run("changed meanwhile", func(t *testing.T) {
		rev := create("cancelled", ours)
		changed := ours
		changed.CancelRequested = true
		if _, err := runs.Update(ctx, "cancelled", changed, rev); err != nil {
			t.Fatal(err)
		}
		got, _, err := markSpawning(ctx, js, runs, "cancelled", ours, rev)
		if err != nil || !got.Spawning || !got.CancelRequested {
			t.Fatalf("mark after a cancel request: %+v, %v; want the mark on top of the request", got, err)
		}
	})
	t.Run("taken over", func(t *testing.T) {
		rev := create("taken", ours)
		other := ours
		other.Node, other.Worker, other.Spawning = "B", "B-2-y", true
		if _, err := runs.Update(ctx, "taken", other, rev); err != nil {
			t.Fatal(err)
		}
		if _, _, err := markSpawning(ctx, js, runs, "taken", ours, rev); !errors.Is(err, errSuperseded) {
			t.Fatalf("mark of a run taken over: %v, want errSuperseded", err)
		}
	})
}
