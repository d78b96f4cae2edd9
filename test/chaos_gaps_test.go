package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The chaos suite's hand-off and recovery gaps, traced: a run can only be
// re-attached by a worker of its own node (its runner and journal are
// there), and attach jobs take a slot whether or not one is free
// (consumer.Handlers.Attach), so a gap is either a ready sibling's
// take-over, or a wait for a worker of the node to (re)start, or overlaps
// a NATS server's outage the test made, or a stall its probe saw (NATS
// answering late, or the machine not running the probe on time). Each gap
// is classified so, and the classes' medians are reported apart.

// gap is one hand-off (from the holder's "handoff" status) or recovery
// (from the test's SIGKILL of the holder) until the successor's "attached".
type gap struct {
	kind       string // "hand-off" or "recovery"
	run        string
	from, to   string // worker ids, "<node>-<pid>-<random>"
	node       string
	start, end time.Time
}

// outage is a NATS server's fault as the test made it: from its stop (or
// loss) until it listened again (or the cluster was healthy again).
type outage struct {
	server   string
	down, up time.Time
}

// natsSettle is how long after a server is back its clients count as still
// recovering from its outage: they reconnect (100 ms apart in the suite's
// workers), their consumers and watches resume, a stream leader is elected.
const natsSettle = time.Second

// Gap classes.
const (
	gapReady   = "ready"   // a sibling of the node was ready all through the gap
	gapRestart = "restart" // none was: the gap waited for a worker to (re)start
	gapNATS    = "nats"    // a NATS outage the test made overlapped the gap
	gapStall   = "stall"   // none did, but a stall the probe saw did
)

var gapClasses = []string{gapReady, gapRestart, gapNATS, gapStall}

// life is one worker process as the gaps' trace sees it.
type life struct {
	name, node      string
	pid             int
	spawned, exited time.Time
	ready           time.Time // zero if its log says it never was
}

// lifeIndex gathers every worker process of the run, with the time its
// log says it was ready.
func lifeIndex(workers []*workerProc) []life {
	var out []life
	for _, w := range workers {
		w.mu.Lock()
		lives := append([]*workerLife(nil), w.lives...)
		w.mu.Unlock()
		for _, l := range lives {
			w.mu.Lock()
			exited := l.exited
			w.mu.Unlock()
			out = append(out, life{name: w.name, node: w.node, pid: l.pid, spawned: l.spawned, exited: exited, ready: readyAt(l.log)})
		}
	}
	return out
}

// readyAt is the time of the "worker ready" line of a worker's JSON log.
func readyAt(path string) time.Time {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}
	}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, `"worker ready"`) {
			continue
		}
		var l struct {
			Time    string `json:"time"`
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "worker ready" {
			continue
		}
		if at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", l.Time); err == nil {
			return at
		}
	}
	return time.Time{}
}

// upAt reports whether l's process ran at t, and was ready by then.
func (l life) upAt(t time.Time) (up, ready bool) {
	up = !l.spawned.After(t) && (l.exited.IsZero() || l.exited.After(t))
	return up, up && !l.ready.IsZero() && !l.ready.After(t)
}

// lifeOf is the process of worker id (by its pid) that ran at t.
func lifeOf(lives []life, id string, t time.Time) (life, bool) {
	pid := pidOf(id)
	for _, l := range lives {
		if l.pid == pid && !l.spawned.After(t) {
			return l, true
		}
	}
	return life{}, false
}

// classify says why g took as long as it did, and describes what the
// node's workers and NATS were doing meanwhile; afterReady is how long the
// successor took once it was ready, when it became ready during the gap.
func classify(g gap, lives []life, outages, stalls []outage) (class, trace string, afterReady time.Duration, readyDuring bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s on node %s: %v from %s to %s", g.kind, g.run, g.node, g.end.Sub(g.start).Round(time.Millisecond), g.from, g.to)
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%+.3fs", t.Sub(g.start).Seconds())
	}
	if to, ok := lifeOf(lives, g.to, g.end); ok {
		fmt.Fprintf(&b, "; the successor %s (pid %d) spawned %s, ready %s", to.name, to.pid, rel(to.spawned), rel(to.ready))
		if readyDuring = to.ready.After(g.start) && !to.ready.After(g.end); readyDuring {
			afterReady = g.end.Sub(to.ready)
			fmt.Fprintf(&b, ", attached %v after", afterReady.Round(time.Millisecond))
		}
	}
	holder := pidOf(g.from)
	if from, ok := lifeOf(lives, g.from, g.start); ok {
		fmt.Fprintf(&b, "; the holder exited %s", rel(from.exited))
	}
	readySibling := false
	for _, l := range lives {
		if l.node != g.node || l.pid == holder {
			continue
		}
		up, ready := l.upAt(g.start)
		if !up {
			if l.pid != pidOf(g.to) && l.spawned.After(g.start) && l.spawned.Before(g.end) {
				// A start of the node's that did not take the run.
				fmt.Fprintf(&b, "; %s (pid %d) spawned %s, ready %s, exited %s", l.name, l.pid, rel(l.spawned), rel(l.ready), rel(l.exited))
			}
			continue
		}
		// Ready at the gap's start and running until its end.
		through := ready && (l.exited.IsZero() || !l.exited.Before(g.end))
		readySibling = readySibling || through
		fmt.Fprintf(&b, "; sibling %s (pid %d) up, ready %s, exited %s", l.name, l.pid, rel(l.ready), rel(l.exited))
	}
	nats := false
	for _, o := range outages {
		if o.down.Before(g.end) && o.up.Add(natsSettle).After(g.start) {
			nats = true
			fmt.Fprintf(&b, "; NATS %s down %s to %s", o.server, rel(o.down), rel(o.up))
		}
	}
	stalled := false
	for _, o := range stalls {
		if o.down.Before(g.end) && o.up.After(g.start) {
			stalled = true
			fmt.Fprintf(&b, "; %s %s to %s", o.server, rel(o.down), rel(o.up))
		}
	}
	switch {
	case nats:
		class = gapNATS
	case stalled:
		class = gapStall
	case readySibling:
		class = gapReady
	default:
		class = gapRestart
	}
	return class, b.String(), afterReady, readyDuring
}

// reportGaps logs every gap with its trace and returns the summary of
// each class, for kind, as "kind_class=summary" fields, and of the restart
// class's gaps from their successor's ready to its "attached"
// (kind_restart_after_ready): the part of the gap that is not the start.
func reportGaps(t *testing.T, kind string, gaps []gap, lives []life, outages, stalls []outage) string {
	t.Helper()
	byClass := map[string][]time.Duration{}
	var afterReady []time.Duration
	for _, g := range gaps {
		class, trace, after, readyDuring := classify(g, lives, outages, stalls)
		byClass[class] = append(byClass[class], g.end.Sub(g.start))
		if class == gapRestart && readyDuring {
			afterReady = append(afterReady, after)
		}
		t.Logf("gap [%s] %s", class, trace)
	}
	var fields []string
	for _, c := range gapClasses {
		fields = append(fields, fmt.Sprintf("%s_%s=%s", kind, c, summarize(byClass[c])))
	}
	fields = append(fields, fmt.Sprintf("%s_restart_after_ready=%s", kind, summarize(afterReady)))
	return strings.Join(fields, " ")
}

// durations are the gaps' lengths.
func durations(gaps []gap) []time.Duration {
	var out []time.Duration
	for _, g := range gaps {
		out = append(out, g.end.Sub(g.start))
	}
	return out
}

// apart are the stalls that overlap none of the outages the test made
// (with natsSettle): the probe's requests fail through those too.
func apart(stalls, outages []outage) []outage {
	var out []outage
	for _, s := range stalls {
		if !slices.ContainsFunc(outages, func(o outage) bool { return o.down.Before(s.up) && o.up.Add(natsSettle).After(s.down) }) {
			out = append(out, s)
		}
	}
	return out
}

// stallMin is the shortest stall the probe records: as long as a hand-off
// may take.
const stallMin = 250 * time.Millisecond

// stallProbe asks JetStream for the account's info every 100 ms from its
// own connection and records, as outages, the windows in which the
// answer took stallMin or more, or failed, or the probe itself woke
// stallMin late (the machine did not run it): what every worker's NATS
// round trips met then too. stop ends it and returns the windows.
func stallProbe(t *testing.T, procs []*natsProc) (stop func() []outage) {
	t.Helper()
	nc, js := clientOf(t, procs)
	done := make(chan struct{})
	var stalls []outage
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer nc.Close()
		const every = 100 * time.Millisecond
		next := time.Now().Add(every)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Until(next)):
			}
			if late := time.Since(next); late >= stallMin {
				stalls = append(stalls, outage{fmt.Sprintf("stall (the probe woke %v late)", late.Round(time.Millisecond)), next, time.Now()})
			}
			at := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := js.AccountInfo(ctx)
			cancel()
			if took := time.Since(at); took >= stallMin || err != nil {
				why := fmt.Sprintf("JetStream answered in %v", took.Round(time.Millisecond))
				if err != nil {
					why = fmt.Sprintf("JetStream failed after %v: %v", took.Round(time.Millisecond), err)
				}
				stalls = append(stalls, outage{"stall (" + why + ")", at, time.Now()})
			}
			next = time.Now().Add(every)
		}
	}()
	var once sync.Once
	stop = func() []outage {
		once.Do(func() { close(done) })
		<-finished
		return stalls
	}
	t.Cleanup(func() { stop() })
	return stop
}
