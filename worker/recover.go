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

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// recoverLoop brings runs of this node that nobody publishes back to a
// worker: at start and every half lease TTL it scans the state dir, and it
// reacts at once to a worker of this node whose liveness key expires (its
// limit marker) or is removed, and to a lease that is released.
// Both only publish attach jobs; the attach handler decides, under the
// lease, whether there is anything to take over. leases is the watch of
// the leases bucket opened before the worker was ready (nil if that failed).
func (w *Worker) recoverLoop(ctx context.Context, leases <-chan kv.Entry[kv.LeaseRecord]) {
	go w.watchLeases(ctx, leases)
	t := time.NewTicker(max(w.cfg.LeaseTTL/2, 100*time.Millisecond))
	defer t.Stop()
	window := max(w.cfg.LeaseTTL, time.Millisecond)
	for {
		w.scan(ctx, fmt.Sprintf("scan:%d", time.Now().UnixNano()/int64(window)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scan offers every unfinished run directory of this node for re-attach.
// tag names the occasion (a time window, a liveness key's expiry) in the
// attach jobs' IDs, so the node's workers that scan for the same one
// publish one job per run.
func (w *Worker) scan(ctx context.Context, tag string) {
	entries, err := os.ReadDir(filepath.Join(w.stateDir, "runs"))
	if err != nil {
		w.log.Warn().Err(err).Msg("scan run directories")
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
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			// One attach job per run, occasion and lease revision,
			// however many workers scan (offer adds the revision).
			w.offer(ctx, id, fmt.Sprintf("attach:%s:%s", id, tag))
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
func (w *Worker) watchLeases(ctx context.Context, ch <-chan kv.Entry[kv.LeaseRecord]) {
	for ; ctx.Err() == nil; ch = nil {
		if ch == nil {
			var err error
			if ch, err = w.openLeaseWatch(ctx); err != nil {
				w.log.Warn().Err(err).Msg("watch leases")
				clock.Sleep(ctx, time.Second)
				continue
			}
		}
		for e := range ch {
			if id, ok := strings.CutPrefix(e.Key, lease.LiveKey(w.node, "")); ok {
				if e.Op == jetstream.KeyValuePurge || e.Op == jetstream.KeyValueDelete {
					w.log.Info().Str("key", e.Key).Msg("a worker of this node lost its liveness; recovering its runs")
					w.scan(ctx, fmt.Sprintf("live:%d", e.Revision))
				} else {
					// A worker of this node, alive: its process is watched.
					w.watchSibling(ctx, id)
				}
				continue
			}
			if !protocol.ValidRunID(e.Key) {
				w.log.Warn().Str("key", e.Key).Msg("lease key is not a valid run id; skipped")
				continue
			}
			// A lease held here whose key another writer changed is lost.
			w.live.Observe(e.Key, e.Revision)
			gone := e.Op == jetstream.KeyValuePurge || e.Op == jetstream.KeyValueDelete
			if gone || (e.Err == nil && e.Value.State == kv.LeaseReleased) {
				w.offer(ctx, e.Key, fmt.Sprintf("attach:%s:lease:%d", e.Key, e.Revision))
			}
		}
		clock.Sleep(ctx, 100*time.Millisecond)
	}
}

// openLeaseWatch watches the leases bucket for new writes: every run's
// lease, and the liveness keys of this node's workers. Writes from before
// it are not replayed (the recovery scan covers what they left).
func (w *Worker) openLeaseWatch(ctx context.Context) (<-chan kv.Entry[kv.LeaseRecord], error) {
	return w.leases.WatchFiltered(ctx, []string{"*", lease.LiveKeys(w.node)}, jetstream.UpdatesOnly())
}

// offer publishes an attach job for a run whose directory is on this node,
// unless it is finished, held here, or held by a live lease.
func (w *Worker) offer(ctx context.Context, runID, msgID string) {
	dir, err := w.runDir(runID)
	if err != nil {
		w.log.Warn().Err(err).Msg("offer run for re-attach")
		return
	}
	// Held here first: a map lookup, where the others stat the disk.
	if w.isActive(runID) || !exists(string(dir)) || exists(dir.Finished()) {
		return
	}
	l, leaseRev, lerr := w.leases.Get(ctx, runID)
	switch {
	case lerr == nil && l.State == kv.LeaseHeld:
		if held, err := w.live.HeldLive(ctx, runID, l, leaseRev); err != nil || held {
			return
		}
	case lerr != nil && !errors.Is(lerr, kv.ErrNotFound):
		return
	}
	rec, _, err := w.runs.Get(ctx, runID)
	if err != nil {
		return
	}
	if rec.Node != w.node {
		w.removeAbandonedStart(runID, dir)
		return
	}
	if rec.State.Terminal() {
		if rec.State == kv.RunState(protocol.StatusLost) {
			w.stopLostAgent(ctx, dir, rec)
			return
		}
		w.markFinished(runID)
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
	if err := w.requestAttach(ctx, runID, reason, msgID); err != nil && ctx.Err() == nil {
		w.log.Warn().Err(err).Str("run_id", runID).Msg("publish attach job")
	}
}

// removeAbandonedStart removes the directory of a run that a worker of
// this node began to start and another node's worker then took over and
// started there (start): no runner of this node ever took it, so nothing
// will use it, and a root worker's mounted workspace would otherwise stay
// for good. A directory changed lately may be a start still being
// prepared, whose spawning mark then fails: left to that start.
func (w *Worker) removeAbandonedStart(runID string, dir journal.Dir) {
	if runnerTookRun(dir) || w.preparedLately(dir) {
		return
	}
	if err := sandbox.ReleaseWorkspace(dir); err != nil {
		w.log.Warn().Err(err).Str("run_id", runID).Msg("release the workspace of a start moved to another node")
		return
	}
	if err := removeTree(string(dir)); err != nil {
		w.log.Warn().Err(err).Str("run_id", runID).Msg("remove the directory of a start moved to another node")
		return
	}
	w.log.Info().Str("run_id", runID).Msg("removed the directory of a start moved to another node")
}
