package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// runMsg is a message of a run as a live subscriber got it.
type runMsg struct {
	at     time.Time
	runID  string
	kind   protocol.RunKind
	data   []byte // the message's own buffer: not reused by the client
	epoch  uint64
	status *protocol.Status // for a status
}

// subscribe calls fn, on one goroutine and in order, with every message
// on filter, stamped with the time the subscriber got it. The
// subscription has no pending limit: a slow reader falls behind, and the
// figures show it, but loses nothing.
func (e *env) subscribe(filter string, fn func(runMsg)) (*nats.Subscription, error) {
	sub, err := e.sub.Subscribe(filter, func(m *nats.Msg) {
		at := time.Now()
		runID, kind, ok := e.names.ParseRunSubject(m.Subject)
		if !ok {
			return
		}
		rm := runMsg{at: at, runID: runID, kind: kind, data: m.Data}
		rm.epoch, _ = strconv.ParseUint(m.Header.Get(protocol.HeaderEpoch), 10, 64)
		if kind == protocol.KindStatus {
			if st, err := protocol.ParseStatus(m.Data); err == nil {
				rm.status = &st
			}
		}
		fn(rm)
	})
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	// The server has the interest before anything is published.
	return sub, e.sub.Flush()
}

// terminal collects the terminal statuses of runs.
type terminal struct {
	mu   sync.Mutex
	done map[string]protocol.Status
	ch   chan struct{} // poked on every terminal status
}

func newTerminal() *terminal {
	return &terminal{done: map[string]protocol.Status{}, ch: make(chan struct{}, 1)}
}

func (t *terminal) see(m runMsg) {
	if m.status == nil || !m.status.Status.Terminal() {
		return
	}
	t.mu.Lock()
	t.done[m.runID] = *m.status
	t.mu.Unlock()
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// wait waits until n runs have ended, and returns the statuses of those
// that did (all n, unless it fails).
func (t *terminal) wait(ctx context.Context, n int, timeout time.Duration) (map[string]protocol.Status, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		got := maps.Clone(t.done)
		t.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-deadline.C:
			return got, fmt.Errorf("%d of %d runs ended within %s", len(got), n, timeout)
		case <-t.ch:
		}
	}
}

func (e *env) runDir(runID string) journal.Dir {
	return journal.Dir(filepath.Join(e.stateDir, "runs", runID))
}

// waitRuns waits until every run of ids has ended, like terminal.wait,
// and reports a job the worker rejected (to the DLQ) as a failed run.
func (e *env) waitRuns(ctx context.Context, t *terminal, ids []string, timeout time.Duration) (map[string]protocol.Status, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := t.wait(ctx, len(ids), time.Second)
		if err == nil || ctx.Err() != nil {
			return st, err
		}
		if entries, derr := e.client.DLQ(ctx, 2*len(ids)); derr == nil {
			for _, d := range entries {
				if _, done := st[d.MsgID]; !done && slices.Contains(ids, d.MsgID) {
					st[d.MsgID] = protocol.Status{Status: protocol.StatusFailed, RunID: d.MsgID,
						Reason: fmt.Sprintf("job rejected (%s): %s", d.Reason, d.Error)}
				}
			}
			if len(st) >= len(ids) {
				return st, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, err
		}
	}
}

// journalLines returns the lines a run's journal holds before its
// sentinel: what the run's chain must carry, each once, in order.
func (e *env) journalLines(runID string) ([][]byte, error) {
	nonce, err := sandbox.ReadNonce(e.runDir(runID))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(e.runDir(runID).Journal())
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, errors.New("journal ends with a partial line")
		}
		lines = append(lines, b[:i])
		b = b[i+1:]
	}
	if n := len(lines); n == 0 || !bytes.Contains(lines[n-1], []byte(nonce)) {
		return nil, errors.New("journal does not end with the run's sentinel")
	}
	return lines[:len(lines)-1], nil
}

// checkChain compares the stream's record of a run (its events and raw
// messages, in stream order) with its journal: exactly once, in order,
// byte for byte. It returns the number of lines.
func (e *env) checkChain(ctx context.Context, runID string) (int, error) {
	n, _, err := e.checkChainTimes(ctx, runID)
	return n, err
}

// checkChainTimes is checkChain, and also returns how long the lines took
// to be stored: from the first line's stream timestamp to the last's.
func (e *env) checkChainTimes(ctx context.Context, runID string) (int, time.Duration, error) {
	want, err := e.journalLines(runID)
	if err != nil {
		return 0, 0, fmt.Errorf("run %s: %w", runID, err)
	}
	cons, err := e.js.OrderedConsumer(ctx, e.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{e.names.EventsSubject(runID), e.names.RawSubject(runID)},
	})
	if err != nil {
		return 0, 0, err
	}
	i := 0
	var first, last time.Time
	for i < len(want) {
		batch, err := cons.Fetch(min(len(want)-i, 10000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return i, 0, err
		}
		n := i
		for m := range batch.Messages() {
			if i >= len(want) {
				return i, 0, fmt.Errorf("run %s: the stream holds more lines than the journal's %d", runID, len(want))
			}
			if md, err := m.Metadata(); err == nil {
				if i == 0 {
					first = md.Timestamp
				}
				last = md.Timestamp
			}
			if !bytes.Equal(m.Data(), want[i]) {
				return i, 0, fmt.Errorf("run %s: stream line %d is %.60q, journal line is %.60q", runID, i+1, m.Data(), want[i])
			}
			i++
		}
		if err := batch.Error(); err != nil {
			return i, 0, err
		}
		if i == n {
			return i, 0, fmt.Errorf("run %s: the stream holds %d lines, the journal %d", runID, i, len(want))
		}
	}
	// Nothing after the last line but statuses.
	extra, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
	if err == nil {
		for range extra.Messages() {
			return i, 0, fmt.Errorf("run %s: the stream holds more lines than the journal's %d", runID, len(want))
		}
	}
	return i, last.Sub(first), nil
}
