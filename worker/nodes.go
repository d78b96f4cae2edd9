package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// nodeGrace is how long a node may miss its heartbeats before its runs are
// lost: the nodes bucket's TTL (an entry expires after that long without a
// heartbeat) plus the same again as observed by the reaper itself.
func nodeGrace(leaseTTL time.Duration) time.Duration { return 3 * leaseTTL }

// reaper marks `lost` the unfinished runs of nodes gone past the grace
// period. Every worker runs it; the run's lease makes exactly one of them
// publish the terminal status, and the record is changed only by CAS. It
// finds runs in the node index, never by listing records: the whole index
// once at start, for nodes that vanished before this worker came up, then
// the entries of absent nodes.
type reaper struct {
	nc         *nats.Conn // the worker's connection: is it connected
	nodes      *kv.Nodes
	index      nodeIndex
	runs       *kv.Runs
	node       string
	grace      time.Duration
	beatFailed func() time.Time // when this worker's heartbeat last failed
	// markLost ends a run of a lost node (the worker's run handling).
	markLost func(ctx context.Context, runID string, rec kv.RunRecord)
	passes   prometheus.Histogram
	log      zerolog.Logger
	clock    clock.Clock

	started     bool
	prevLive    map[string]bool
	absentSince map[string]time.Time
}

func (w *Worker) newReaper(beatFailed func() time.Time) *reaper {
	return &reaper{nc: w.nc, nodes: w.nodes, index: w.index, runs: w.runs, node: w.node, grace: nodeGrace(w.cfg.LeaseTTL),
		beatFailed: beatFailed, markLost: w.markLost, passes: w.metrics.reapPasses, log: w.log, clock: w.clock,
		absentSince: map[string]time.Time{}}
}

func (rp *reaper) run(ctx context.Context) {
	up := rp.clock.Now()
	t := rp.clock.NewTicker(max(rp.grace/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		// After an outage every heartbeat has expired, ours included: judge
		// other nodes only once we have been heartbeating for a full grace.
		// An outage is also a connected one: a NATS cluster without a
		// quorum (a server lost) refuses every node's heartbeat alike, so
		// an absence seen while ours failed is no evidence either.
		if !rp.nc.IsConnected() || rp.beatFailed().After(up) {
			up = rp.clock.Now()
			rp.forget()
			continue
		}
		if rp.clock.Now().Sub(up) < rp.grace {
			continue
		}
		rp.reap(ctx)
	}
}

// forget drops what the reaper saw of other nodes' absences.
func (rp *reaper) forget() {
	clear(rp.absentSince)
	rp.prevLive = nil
}

func (rp *reaper) reap(ctx context.Context) {
	keys, err := rp.nodes.Keys(ctx)
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, k := range keys {
		node, _, _ := strings.Cut(k, ".")
		live[node] = true
	}
	if !live[rp.node] {
		return // our own heartbeat is not visible: trust nothing
	}
	now := rp.clock.Now()
	if !rp.track(live, now) && rp.started {
		return
	}
	// The index holds only unfinished runs: at start every node's, then
	// only those of absent nodes. So a pass costs what is live, whatever
	// the number of records.
	var filters []string
	if rp.started {
		for node := range rp.absentSince {
			filters = append(filters, protocol.NodeRunKey(node, "*"))
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	keys, err = rp.index.list(lctx, filters)
	cancel()
	if err != nil {
		rp.log.Warn().Err(err).Msg("list the node index")
		return
	}
	pending := map[string]bool{}
	for _, k := range keys {
		if node, wait := rp.reapEntry(ctx, k, live, now); wait {
			pending[node] = true
		}
	}
	rp.started = true
	rp.passes.Observe(rp.clock.Now().Sub(now).Seconds())
	// A node with no unfinished run left is no longer watched.
	for node := range rp.absentSince {
		if !pending[node] {
			delete(rp.absentSince, node)
		}
	}
}

// track updates since when each node has been absent, from the nodes live
// now, and reports whether a node has been absent past the grace.
func (rp *reaper) track(live map[string]bool, now time.Time) (due bool) {
	for node := range rp.prevLive {
		if !live[node] {
			if _, ok := rp.absentSince[node]; !ok {
				rp.absentSince[node] = now
			}
		}
	}
	for node := range rp.absentSince {
		if live[node] {
			delete(rp.absentSince, node)
		}
	}
	rp.prevLive = live
	for _, since := range rp.absentSince {
		due = due || now.Sub(since) >= rp.grace
	}
	return due
}

// reapEntry handles the node index entry k: a run of an absent node past
// the grace is marked lost, a stale entry removed. wait is true when the
// entry's node still has a run that a later pass must look at again.
func (rp *reaper) reapEntry(ctx context.Context, k string, live map[string]bool, now time.Time) (node string, wait bool) {
	node, id, ok := strings.Cut(k, ".")
	if !ok || !protocol.ValidRunID(id) {
		rp.log.Warn().Str("key", k).Msg("node index entry skipped: not <node>.<run id>, or an invalid run id")
		return node, false
	}
	if live[node] {
		return node, false
	}
	since, seen := rp.absentSince[node]
	if !seen {
		rp.absentSince[node] = now // a node gone before we started
		return node, true
	}
	if now.Sub(since) < rp.grace {
		return node, true
	}
	rec, _, err := rp.runs.Get(ctx, id)
	switch {
	case err == nil && rec.RunID != id:
		rp.log.Warn().Str("key", id).Str("record_run_id", rec.RunID).Msg("run record skipped: not its key's run")
		return node, false
	case errors.Is(err, kv.ErrNotFound), err == nil && (rec.State.Terminal() || rec.Node != node):
		rp.index.remove(ctx, node, id) // stale: the run ended, or moved
		return node, false
	case err != nil:
		return node, true
	}
	rp.markLost(ctx, id, rec)
	return node, false
}

// nodeIndex is the bucket of the unfinished runs by node
// (protocol.NodeRunKey): a run enters it as it is started or taken over,
// and leaves it as it ends; the reaper finds an absent node's runs there.
type nodeIndex struct {
	kv  jetstream.KeyValue
	log zerolog.Logger
}

// add records that runID is an unfinished run of node.
func (x nodeIndex) add(ctx context.Context, node, runID string) error {
	_, err := x.kv.Put(ctx, protocol.NodeRunKey(node, runID), nil)
	return err
}

// remove removes runID from node's unfinished runs. A failure leaves a
// stale entry, which the reaper drops when it finds the run ended.
func (x nodeIndex) remove(ctx context.Context, node, runID string) {
	if err := x.kv.Purge(ctx, protocol.NodeRunKey(node, runID), jetstream.PurgeTTL(time.Minute)); err != nil && ctx.Err() == nil {
		x.log.Warn().Err(err).Str("run_id", runID).Str("run_node", node).Msg("remove run from the node index")
	}
}

// list lists the keys matching filters (all keys when there are none); an
// empty index gives none.
func (x nodeIndex) list(ctx context.Context, filters []string) ([]string, error) {
	opts := []jetstream.WatchOpt{jetstream.MetaOnly(), jetstream.IgnoreDeletes()}
	var kw jetstream.KeyWatcher
	var err error
	if len(filters) == 0 {
		kw, err = x.kv.WatchAll(ctx, opts...)
	} else {
		kw, err = x.kv.WatchFiltered(ctx, filters, opts...)
	}
	if err != nil {
		return nil, err
	}
	defer kw.Stop()
	var keys []string
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-kw.Updates():
			if !ok {
				return nil, errors.New("watcher stopped")
			}
			if e == nil { // end of the current keys
				return keys, nil
			}
			keys = append(keys, e.Key())
		}
	}
}

// markLost ends a run of a lost node: under its lease, it publishes the
// terminal `lost` status on the run's chain and records it.
func (w *Worker) markLost(ctx context.Context, runID string, rec kv.RunRecord) {
	log := w.log.With().Str("run_id", runID).Str("run_node", rec.Node).Logger()
	dir, err := runDir(w.stateDir, runID)
	if err != nil {
		log.Warn().Err(err).Msg("mark run lost")
		return
	}
	l, err := w.live.Acquire(ctx, runID)
	if err != nil {
		if !errors.Is(err, lease.ErrHeld) {
			log.Warn().Err(err).Msg("take lease of a lost node's run")
		}
		return
	}
	r := &run{id: runID, dir: dir, rec: rec, lease: l, log: log.With().Uint64("epoch", l.Epoch()).Logger()}
	pos, err := publisher.Align(ctx, w.js, w.names, runID)
	if err != nil {
		log.Warn().Err(err).Msg("align lost run")
		l.Stop()
		return
	}
	r.chain, r.offset = w.newChain(r, pos.Seq), pos.Offset
	if pos.Status != nil && pos.Status.Status.Terminal() {
		w.recordTerminal(ctx, r, *pos.Status)
		return
	}
	reason := fmt.Sprintf("node %s sent no heartbeat for more than %v", rec.Node, 2*nodeGrace(w.cfg.LeaseTTL))
	// The retry is submitted before the terminal status: if this worker
	// dies in between, the next reaper submits it again under the same
	// Msg-Id, so a retry is never lost nor doubled.
	retryID, err := w.retry(ctx, rec)
	if err != nil {
		log.Error().Err(err).Msg("submit retry of lost run")
		l.Stop()
		return
	}
	if retryID != "" {
		reason += "; retried as run " + retryID
	}
	w.finish(ctx, r, protocol.Status{Status: protocol.StatusLost, Reason: reason, RetriedAs: retryID})
}

// retry submits the next attempt of a lost run when its job allows one,
// and returns its runId ("" when no attempt is left).
func (w *Worker) retry(ctx context.Context, rec kv.RunRecord) (string, error) {
	if rec.Retries == 0 || rec.Attempt > rec.Retries || len(rec.Job) == 0 {
		return "", nil
	}
	lim := w.cfg.Limits()
	lim.ReservedLabels = true // the kept job of a retry carries them
	job, err := protocol.DecodeJob(rec.Job, protocol.ContentTypeJSON, lim)
	if err != nil {
		return "", fmt.Errorf("kept job of run %s: %w", rec.RunID, err)
	}
	first := rec.RunID
	if f := rec.Labels[protocol.LabelRetryOf]; f != "" {
		first = f
	}
	if !protocol.ValidRunID(first) {
		return "", fmt.Errorf("%w %q as the first attempt of run %s", errInvalidRunID, first, rec.RunID)
	}
	job.RunID = protocol.RetryRunID(first, rec.Attempt+1)
	job.Labels = maps.Clone(job.Labels)
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[protocol.LabelRetryOf] = first
	job.Labels[protocol.LabelAttempt] = strconv.Itoa(rec.Attempt + 1)
	b, err := protocol.EncodeWorkerJob(job)
	if err != nil {
		return "", err
	}
	msg := nats.NewMsg(w.names.RetryJobSubject())
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, job.RunID)
	if _, err := w.js.PublishMsg(ctx, msg); err != nil {
		return "", err
	}
	return job.RunID, nil
}
