package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// recovery brings runs of this node that nobody publishes back to a
// worker: at start and every half lease TTL it scans the state dir, and it
// reacts at once to a worker of this node whose liveness key expires (its
// limit marker) or is removed, and to a lease that is released.
// Both only publish attach jobs; the attach handler decides, under the
// lease, whether there is anything to take over.
type recovery struct {
	stateDir string
	node     string
	leaseTTL time.Duration
	// preparing is how long a start may leave a run's directory unchanged
	// while it prepares it (preparedLately).
	preparing time.Duration
	leases    *kv.Leases
	records   *kv.Runs
	live      *lease.Liveness
	held      func(runID string) bool // the runs this worker holds
	handling  recoveryRuns
	// watchSibling watches the process of a worker of this node whose
	// liveness key was written (siblings).
	watchSibling func(ctx context.Context, workerID string)
	log          zerolog.Logger
	clock        clock.Clock

	// watch is the watch of the leases bucket opened before the worker
	// was ready (openWatch), nil if that failed.
	watch <-chan kv.Entry[kv.LeaseRecord]
}

// recoveryRuns is what recovery asks of the worker's run handling.
type recoveryRuns interface {
	requestAttach(ctx context.Context, runID, reason, msgID string) error
	markFinished(runID string)
	stopLostAgent(ctx context.Context, dir journal.Dir, rec kv.RunRecord)
}

func (w *Worker) newRecovery(watchSibling func(context.Context, string)) *recovery {
	return &recovery{stateDir: w.stateDir, node: w.node, leaseTTL: w.cfg.LeaseTTL, preparing: w.preparing(),
		leases: w.leases, records: w.runs, live: w.live, held: w.isActive, handling: w,
		watchSibling: watchSibling, log: w.log, clock: w.clock}
}

// openWatch opens the watch of the leases bucket, before the worker is
// ready: a lease written once the worker is ready is seen (with no bucket
// TTL, nothing would bring it back later).
func (rc *recovery) openWatch(ctx context.Context) {
	var err error
	if rc.watch, err = rc.openLeaseWatch(ctx); err != nil {
		rc.log.Warn().Err(err).Msg("watch leases; retrying")
	}
}

func (rc *recovery) run(ctx context.Context) {
	go rc.watchLeases(ctx, rc.watch)
	t := rc.clock.NewTicker(max(rc.leaseTTL/2, 100*time.Millisecond))
	defer t.Stop()
	window := max(rc.leaseTTL, time.Millisecond)
	for {
		rc.scan(ctx, fmt.Sprintf("scan:%d", rc.clock.Now().UnixNano()/int64(window)))
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// scan offers every unfinished run directory of this node for re-attach.
// tag names the occasion (a time window, a liveness key's expiry) in the
// attach jobs' IDs, so the node's workers that scan for the same one
// publish one job per run.
func (rc *recovery) scan(ctx context.Context, tag string) {
	entries, err := os.ReadDir(filepath.Join(rc.stateDir, "runs"))
	if err != nil {
		rc.log.Warn().Err(err).Msg("scan run directories")
		return
	}
	// Offered scanOffers at a time: an offer is up to four NATS round
	// trips, and a dead worker's runs wait for theirs (a soak's recoveries
	// spent a median 0.26 s, and up to 0.9 s, scanning one by one).
	var wg sync.WaitGroup
	slots := make(chan struct{}, scanOffers)
	defer wg.Wait()
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		id := e.Name()
		if !e.IsDir() || !protocol.ValidRunID(id) {
			continue
		}
		// A run this worker holds is not offered: skipped here, not in a
		// goroutine of its own (200 held runs woke 190 goroutines a scan,
		// most of an idle worker's wakes).
		if rc.held(id) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			// One attach job per run, occasion and lease revision,
			// however many workers scan (offer adds the revision).
			rc.offer(ctx, id, fmt.Sprintf("attach:%s:%s", id, tag))
		})
	}
}

// scanOffers bounds the offers a scan makes at once.
const scanOffers = 8

// watchLeases offers a run for re-attach as soon as its lease is released,
// and the runs of this node as soon as one of its workers' liveness keys
// expires or is removed: that worker's leases are then free to take. It
// sees one write per lease taken, handed off or ended, and one per worker
// of the node every TTL/3, never one per run and period.
func (rc *recovery) watchLeases(ctx context.Context, ch <-chan kv.Entry[kv.LeaseRecord]) {
	for ; ctx.Err() == nil; ch = nil {
		if ch == nil {
			var err error
			if ch, err = rc.openLeaseWatch(ctx); err != nil {
				rc.log.Warn().Err(err).Msg("watch leases")
				rc.clock.Sleep(ctx, time.Second)
				continue
			}
		}
		for e := range ch {
			if id, ok := strings.CutPrefix(e.Key, lease.LiveKey(rc.node, "")); ok {
				if e.Op == jetstream.KeyValuePurge || e.Op == jetstream.KeyValueDelete {
					rc.log.Info().Str("key", e.Key).Msg("a worker of this node lost its liveness; recovering its runs")
					rc.scan(ctx, fmt.Sprintf("live:%d", e.Revision))
				} else {
					// A worker of this node, alive: its process is watched.
					rc.watchSibling(ctx, id)
				}
				continue
			}
			if !protocol.ValidRunID(e.Key) {
				rc.log.Warn().Str("key", e.Key).Msg("lease key is not a valid run id; skipped")
				continue
			}
			// A lease held here whose key another writer changed is lost.
			rc.live.Observe(e.Key, e.Revision)
			gone := e.Op == jetstream.KeyValuePurge || e.Op == jetstream.KeyValueDelete
			if gone || (e.Err == nil && e.Value.State == kv.LeaseReleased) {
				rc.offer(ctx, e.Key, fmt.Sprintf("attach:%s:lease:%d", e.Key, e.Revision))
			}
		}
		rc.clock.Sleep(ctx, 100*time.Millisecond)
	}
}

// openLeaseWatch watches the leases bucket for new writes: every run's
// lease, and the liveness keys of this node's workers. Writes from before
// it are not replayed (the recovery scan covers what they left).
func (rc *recovery) openLeaseWatch(ctx context.Context) (<-chan kv.Entry[kv.LeaseRecord], error) {
	return rc.leases.WatchFiltered(ctx, []string{"*", lease.LiveKeys(rc.node)}, jetstream.UpdatesOnly())
}

// offer publishes an attach job for a run whose directory is on this node,
// unless it is finished, held here, or held by a live lease.
func (rc *recovery) offer(ctx context.Context, runID, msgID string) {
	dir, err := runDir(rc.stateDir, runID)
	if err != nil {
		rc.log.Warn().Err(err).Msg("offer run for re-attach")
		return
	}
	// Held here first: a map lookup, where the others stat the disk.
	if rc.held(runID) || !exists(string(dir)) || exists(dir.Finished()) {
		return
	}
	l, leaseRev, lerr := rc.leases.Get(ctx, runID)
	switch {
	case lerr == nil && l.State == kv.LeaseHeld:
		if held, err := rc.live.HeldLive(ctx, runID, l, leaseRev); err != nil || held {
			return
		}
	case lerr != nil && !errors.Is(lerr, kv.ErrNotFound):
		return
	}
	rec, _, err := rc.records.Get(ctx, runID)
	if err != nil {
		return
	}
	if rec.Node != rc.node {
		rc.removeAbandonedStart(runID, dir)
		return
	}
	if rec.State.Terminal() {
		if rec.State == kv.RunState(protocol.StatusLost) {
			rc.handling.stopLostAgent(ctx, dir, rec)
			return
		}
		rc.handling.markFinished(runID)
		return
	}
	reason := protocol.AttachRecover
	if lerr == nil && l.State == kv.LeaseReleased {
		reason = protocol.AttachHandoff
	}
	// The lease's revision (0: none) makes the ID new whenever the lease
	// changed: a run taken over and given up again within one scan window
	// is offered again, not dropped by JetStream as a duplicate of the
	// first offer (which left it released until the next window).
	msgID = fmt.Sprintf("%s:%d", msgID, leaseRev)
	if err := rc.handling.requestAttach(ctx, runID, reason, msgID); err != nil && ctx.Err() == nil {
		rc.log.Warn().Err(err).Str("run_id", runID).Msg("publish attach job")
	}
}

// removeAbandonedStart removes the directory of a run that a worker of
// this node began to start and another node's worker then took over and
// started there (start): no runner of this node ever took it, so nothing
// will use it, and a root worker's mounted workspace would otherwise stay
// for good. A directory changed lately may be a start still being
// prepared, whose spawning mark then fails: left to that start.
func (rc *recovery) removeAbandonedStart(runID string, dir journal.Dir) {
	if runnerTookRun(dir) || preparedLately(dir, rc.preparing, rc.clock.Now()) {
		return
	}
	if err := sandbox.ReleaseWorkspace(dir); err != nil {
		rc.log.Warn().Err(err).Str("run_id", runID).Msg("release the workspace of a start moved to another node")
		return
	}
	if err := removeTree(string(dir)); err != nil {
		rc.log.Warn().Err(err).Str("run_id", runID).Msg("remove the directory of a start moved to another node")
		return
	}
	rc.log.Info().Str("run_id", runID).Msg("removed the directory of a start moved to another node")
}
