package worker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

func TestDecideRedelivery(t *testing.T) {
	starting := kv.RunRecord{State: kv.RunStarting, Node: "n1"}
	spawning := kv.RunRecord{State: kv.RunStarting, Node: "n1", Spawning: true}
	running := kv.RunRecord{State: kv.RunRunning, Node: "n2"}
	ended := kv.RunRecord{State: kv.RunState(protocol.StatusSucceeded), Node: "n1"}
	for _, tc := range []struct {
		name      string
		existing  kv.RunRecord
		delivered uint64
		sameJob   bool
		want      redelivery
	}{
		{"first delivery of a taken runId", running, 1, false, rejectDuplicate},
		{"delivery count unknown counts as first", starting, 0, false, rejectDuplicate},
		{"first delivery, even of a starting run", starting, 1, false, rejectDuplicate},
		{"first delivery of an ended run", ended, 1, false, rejectDuplicate},
		{"redelivery of a running run", running, 2, false, leaveToNode},
		{"redelivery of an ended run", ended, 3, false, leaveToNode},
		{"redelivery of a run being spawned", spawning, 2, false, leaveToNode},
		{"redelivery of a run never spawned", starting, 2, false, restartHere},
		{"many redeliveries of a run never spawned", starting, 9, false, restartHere},
		// A restarted server's consumer state may be older than its last
		// deliveries: the starting run's own job comes as a first delivery.
		{"its own job, counted first, of a run never spawned", starting, 1, true, restartHere},
		{"its own job, count unknown, of a run never spawned", starting, 0, true, restartHere},
		{"its own job, counted first, of a run being spawned", spawning, 1, true, leaveToNode},
		// Past starting the count decides, as before: an identical job
		// sent again after the run began is still a duplicate.
		{"its own job, counted first, of a running run", running, 1, true, rejectDuplicate},
		{"its own job, counted first, of an ended run", ended, 1, true, rejectDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideRedelivery(tc.existing, tc.delivered, tc.sameJob); got != tc.want {
				t.Errorf("decideRedelivery(%+v, %d, %v) = %d, want %d", tc.existing, tc.delivered, tc.sameJob, got, tc.want)
			}
		})
	}
}

func TestDecideArchive(t *testing.T) {
	missing := fmt.Errorf("%w: workspace object gone", protocol.ErrInvalidJob)
	oversize := fmt.Errorf("%w: workspace of 9 GiB", protocol.ErrOversize)
	away := errors.New("nats: timeout")
	for _, tc := range []struct {
		name      string
		err       error
		delivered uint64
		want      string // the disposition, or "" to go on
	}{
		{"pinned", nil, 1, ""},
		{"pinned on a redelivery", nil, 4, ""},
		{"missing archive, first delivery", missing, 1, "reject"},
		{"missing archive, count unknown", missing, 0, "reject"},
		{"oversize archive, first delivery", oversize, 1, "reject"},
		{"missing archive, redelivered: the run may exist and fails at seeding", missing, 2, ""},
		{"oversize archive, redelivered", oversize, 3, ""},
		{"NATS away", away, 1, "nak 1s"},
		{"NATS away on a redelivery", away, 5, "nak 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, goOn := decideArchive(tc.err, tc.delivered)
			got := ""
			if !goOn {
				got = d.String()
			}
			if got != tc.want {
				t.Errorf("decideArchive(%v, %d) = %q, want %q", tc.err, tc.delivered, got, tc.want)
			}
		})
	}
}

func TestDecideSpawn(t *testing.T) {
	superseded := fmt.Errorf("%w: record now of node n2", errSuperseded)
	failed := errors.New("pasta: no such file")
	for _, tc := range []struct {
		name             string
		err              error
		stopping, marked bool
		want             spawnEnd
	}{
		{"taken over before the mark", superseded, false, false, spawnLeft},
		{"taken over while stopping", superseded, true, false, spawnLeft},
		{"stopping before the mark", failed, true, false, spawnRetry},
		{"stopping after the mark", failed, true, true, spawnRecover},
		{"a start that failed before the mark", failed, false, false, spawnFailed},
		{"a start that failed after the mark", failed, false, true, spawnFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideSpawn(tc.err, tc.stopping, tc.marked); got != tc.want {
				t.Errorf("decideSpawn(%v, stopping %v, marked %v) = %d, want %d", tc.err, tc.stopping, tc.marked, got, tc.want)
			}
		})
	}
}
