package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sandbox"
)

// A node's heartbeat every leaseTTL/3 keeps its entry in the nodes bucket
// (TTL 3 × leaseTTL); a node silent for 6 × leaseTTL (the entry expired,
// then the reaper's grace) has its runs declared lost, and a worker silent
// for leaseTTL loses its runs' leases. On a loaded node the beats come
// late: the longest gap between two heartbeats the node managed is what
// leaseTTL must be chosen against. leaseTTL should be at least twice the
// longest gap, so a gap that long costs no lease and is a twelfth of the
// silence that loses the node.

// gapsFileName is the file in the state directory that keeps the node's
// longest heartbeat gap, for the next worker's start and `baton doctor`.
const gapsFileName = "heartbeat-gaps.json"

// gapsKept is how long a measured gap counts: an overload a week ago says
// little about today's node.
const gapsKept = 7 * 24 * time.Hour

// heartbeatGap is the longest gap between two successful heartbeats of a
// worker of this node.
type heartbeatGap struct {
	Gap      time.Duration `json:"gap"`
	At       time.Time     `json:"at"`
	LeaseTTL time.Duration `json:"leaseTTL"`
	Worker   string        `json:"worker"`
}

// leaseTTLFor is the leaseTTL a node whose heartbeats came gap apart
// needs: twice the gap, in whole seconds.
func leaseTTLFor(gap time.Duration) time.Duration {
	return (2*gap + time.Second - 1).Truncate(time.Second)
}

// gapTooLong says whether gap calls for a longer leaseTTL than ttl.
func gapTooLong(gap, ttl time.Duration) bool { return leaseTTLFor(gap) > ttl }

// readHeartbeatGap reads the node's recorded longest gap; none (ok false)
// when there is no record or it is older than gapsKept.
func readHeartbeatGap(stateDir string, now time.Time) (heartbeatGap, bool, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, gapsFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return heartbeatGap{}, false, nil
	}
	if err != nil {
		return heartbeatGap{}, false, err
	}
	g, err := parseHeartbeatGap(b)
	if err != nil {
		return heartbeatGap{}, false, fmt.Errorf("%s: %w", filepath.Join(stateDir, gapsFileName), err)
	}
	return g, now.Sub(g.At) < gapsKept, nil
}

// errBadGapRecord: the state directory's gap record is not one.
var errBadGapRecord = errors.New("not a heartbeat gap record")

func parseHeartbeatGap(b []byte) (heartbeatGap, error) {
	var g heartbeatGap
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("%w: %v", errBadGapRecord, err)
	}
	if g.Gap <= 0 || g.At.IsZero() {
		return g, fmt.Errorf("%w: want a positive gap and its time, got %v at %v", errBadGapRecord, g.Gap, g.At)
	}
	return g, nil
}

// recordHeartbeatGap keeps g as the node's longest gap unless a longer one
// within gapsKept is recorded. It reports whether g was kept.
func recordHeartbeatGap(stateDir string, g heartbeatGap) (bool, error) {
	if old, ok, err := readHeartbeatGap(stateDir, g.At); err == nil && ok && old.Gap >= g.Gap {
		return false, nil
	}
	b, err := json.Marshal(g)
	if err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(stateDir, gapsFileName+".*")
	if err != nil {
		return false, err
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return false, err
	}
	return true, os.Rename(tmp.Name(), filepath.Join(stateDir, gapsFileName))
}

// HeartbeatCheck is `baton doctor`'s check of leaseTTL against the longest
// heartbeat gap the workers of the node in stateDir recorded.
func HeartbeatCheck(stateDir string, leaseTTL time.Duration) sandbox.Check {
	c := sandbox.Check{Name: "leaseTTL"}
	g, ok, err := readHeartbeatGap(stateDir, time.Now())
	switch {
	case err != nil:
		c.Severity, c.Detail = sandbox.SevWarn, "cannot read the node's heartbeat record: "+err.Error()
		c.Fix = "remove the file; the next worker records it again"
	case !ok:
		c.Severity, c.Detail = sandbox.SevOK, fmt.Sprintf("%v; no heartbeat of this node came late within the last week (none recorded in %s)", leaseTTL, stateDir)
	case gapTooLong(g.Gap, leaseTTL):
		c.Severity = sandbox.SevWarn
		c.Detail = heartbeatAdvice(g, leaseTTL)
		c.Fix = fmt.Sprintf("set leaseTTL: %v (or more) in the configuration of every worker, or give the node more CPU", leaseTTLFor(g.Gap))
	default:
		c.Severity, c.Detail = sandbox.SevOK, fmt.Sprintf("%v is at least twice the node's longest heartbeat gap of the last week (%v at %s)", leaseTTL, g.Gap.Round(time.Millisecond), g.At.Format(time.RFC3339))
	}
	return c
}

// heartbeatAdvice says what a gap means for leaseTTL.
func heartbeatAdvice(g heartbeatGap, leaseTTL time.Duration) string {
	return fmt.Sprintf("a worker of this node (%s) managed no heartbeat for %v at %s: with leaseTTL %v a worker that silent loses its runs' leases after %v and its node is declared lost, its runs ended and retried elsewhere, after %v; leaseTTL should be at least %v",
		g.Worker, g.Gap.Round(time.Millisecond), g.At.Format(time.RFC3339), leaseTTL, leaseTTL, 6*leaseTTL, leaseTTLFor(g.Gap))
}

// heartbeat keeps this worker's entry in the nodes bucket alive, every
// leaseTTL/3 on its clock, and records the node's longest gap between two
// beats (see above).
type heartbeat struct {
	nodes    *kv.Nodes
	node, id string
	capacity func() int // how many more runs the worker can take now
	leaseTTL time.Duration
	stateDir string // where the node's longest gap is kept
	gaps     prometheus.Histogram
	log      zerolog.Logger
	clock    clock.Clock
	// failed is when a beat last failed (unix nanoseconds): the reaper
	// trusts no absence it saw around then.
	failed atomic.Int64
}

func (w *Worker) newHeartbeat() *heartbeat {
	return &heartbeat{nodes: w.nodes, node: w.node, id: w.id,
		capacity: func() int { return w.cfg.Concurrency - w.activeCount() },
		leaseTTL: w.cfg.LeaseTTL, stateDir: w.stateDir, gaps: w.metrics.heartbeatGaps, log: w.log, clock: w.clock}
}

// lastFailure is when a beat last failed (the Unix epoch if none did).
func (hb *heartbeat) lastFailure() time.Time { return time.Unix(0, hb.failed.Load()) }

func (hb *heartbeat) run(ctx context.Context) {
	every := max(hb.leaseTTL/3, 100*time.Millisecond)
	t := hb.clock.NewTicker(every)
	defer t.Stop()
	var last time.Time      // the last heartbeat put
	var worst time.Duration // the longest gap this worker recorded
	for {
		if now, ok := hb.beat(ctx); ok {
			if !last.IsZero() {
				gap := now.Sub(last)
				hb.gaps.Observe(gap.Seconds())
				// Only a notably late beat is worth a write.
				if gap > worst && gap > 2*every {
					worst = gap
					hb.noteGap(heartbeatGap{Gap: gap, At: now.UTC(), LeaseTTL: hb.leaseTTL, Worker: hb.id})
				}
			}
			last = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// beat puts this worker's entry once, and reports when it landed.
func (hb *heartbeat) beat(ctx context.Context) (time.Time, bool) {
	rec := kv.NodeRecord{ID: hb.node, Workers: 1, Capacity: hb.capacity(), Version: Version, Heartbeat: hb.clock.Now()}
	b, err := msgpack.Marshal(rec)
	if err != nil {
		return time.Time{}, false
	}
	if _, err := hb.nodes.KV().Put(ctx, hb.node+"."+hb.id, b); err != nil {
		if ctx.Err() == nil {
			hb.failed.Store(hb.clock.Now().UnixNano())
			hb.log.Warn().Err(err).Msg("node heartbeat")
		}
		return time.Time{}, false
	}
	return hb.clock.Now(), true
}

// noteGap records a late heartbeat's gap for the node, and warns when it
// calls for a longer leaseTTL than this worker's.
func (hb *heartbeat) noteGap(g heartbeatGap) {
	if _, err := recordHeartbeatGap(hb.stateDir, g); err != nil {
		hb.log.Warn().Err(err).Msg("record the node's heartbeat gap")
	}
	if gapTooLong(g.Gap, hb.leaseTTL) {
		hb.log.Warn().Dur("gap", g.Gap).Dur("lease_ttl", hb.leaseTTL).Dur("lease_ttl_needed", leaseTTLFor(g.Gap)).
			Msg("node heartbeat late: " + heartbeatAdvice(g, hb.leaseTTL))
	}
}

// warnRecordedGap warns at start when the node's recorded heartbeat gap
// calls for a longer leaseTTL than this worker's.
func (hb *heartbeat) warnRecordedGap(context.Context) {
	g, ok, err := readHeartbeatGap(hb.stateDir, hb.clock.Now())
	switch {
	case err != nil:
		hb.log.Warn().Err(err).Msg("read the node's heartbeat record")
	case ok && gapTooLong(g.Gap, hb.leaseTTL):
		hb.log.Warn().Dur("gap", g.Gap).Dur("lease_ttl", hb.leaseTTL).Dur("lease_ttl_needed", leaseTTLFor(g.Gap)).
			Msg("leaseTTL is below what this node's heartbeats need: " + heartbeatAdvice(g, hb.leaseTTL))
	}
}
