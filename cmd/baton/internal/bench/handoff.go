package bench

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton/protocol"
)

var (
	handoffTarget = "p50 ≤ 250 ms, SIGTERM → successor's first event"
	crashTarget   = fmt.Sprintf("≤ lease TTL + 1 s = %s, SIGKILL → resumed", leaseTTL+time.Second)
)

// chainState is what the hand-off row follows of its run.
type chainState struct {
	mu     sync.Mutex
	holder string // worker of the last started or attached status
	epoch  uint64 // its epoch
	lines  []lineSeen
}

type lineSeen struct {
	at    time.Time
	epoch uint64
}

// handoff: one run writing 200 lines/s, two workers of one node. The
// holder is stopped (SIGTERM: it hands the run off) or killed (SIGKILL:
// its lease expires) again and again, a fresh worker replacing it each
// time; the time is from the signal to the first line the successor
// publishes, at the live subscriber. At the end the stream must hold
// every journal line once, in order, across all of it.
func (e *env) handoff(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result {
		r := failed("hand-off", handoffTarget, err)
		return append(r, Result{Row: "crash", Target: crashTarget, Measured: "not measured: the hand-off row failed", Pass: miss})
	}
	workers := map[string]*workerProc{}
	n := 0
	spawn := func() error {
		n++
		id := fmt.Sprintf("handoff-%d", n)
		w, err := e.startWorker(ctx, id, 4)
		if err == nil {
			workers[id] = w
		}
		return err
	}
	for range 2 {
		if err := spawn(); err != nil {
			return fail(err)
		}
	}
	const runID = "bench-handoff"
	st := &chainState{}
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		st.mu.Lock()
		defer st.mu.Unlock()
		if m.status != nil {
			if s := m.status.Status; s == protocol.StatusStarted || s == protocol.StatusAttached {
				st.holder, st.epoch = m.status.Worker, m.status.Epoch
			}
			return
		}
		st.lines = append(st.lines, lineSeen{at: m.at, epoch: m.epoch})
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	if err := e.client.Submit(ctx, protocol.Job{RunID: runID, Profile: "stamp",
		Args: []string{"--rate", "200", "--duration", "1h", "--size", "200"}}); err != nil {
		return fail(err)
	}
	// move signals the holder and returns the time to the successor's
	// first line.
	move := func(sig syscall.Signal, timeout time.Duration) (time.Duration, error) {
		// Steady state first: the holder has published for a while.
		if err := e.waitLines(ctx, st, 40, 30*time.Second); err != nil {
			return 0, err
		}
		st.mu.Lock()
		holder, epoch := st.holder, st.epoch
		st.mu.Unlock()
		w := workers[holder]
		if w == nil {
			return 0, fmt.Errorf("the run is held by %q, not a worker of the suite", holder)
		}
		began := time.Now()
		w.signal(sig)
		var took time.Duration
		deadline := time.Now().Add(timeout)
		for took == 0 {
			st.mu.Lock()
			for _, l := range st.lines {
				if l.epoch > epoch {
					took = l.at.Sub(began)
					break
				}
			}
			st.mu.Unlock()
			if took == 0 && time.Now().After(deadline) {
				return 0, fmt.Errorf("no line from a successor %s after %s to %s", timeout, sig, holder)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Forget what is measured; replace the worker that left.
		st.mu.Lock()
		st.lines = st.lines[:0]
		st.mu.Unlock()
		select {
		case <-w.exited:
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("worker %s still running 30s after %s", holder, sig)
		}
		delete(workers, holder)
		return took, spawn()
	}
	var handoffs, crashes []time.Duration
	for range sz.handoffs {
		d, err := move(syscall.SIGTERM, 10*time.Second)
		if err != nil {
			return fail(err)
		}
		e.logf("hand-off: %s", d)
		handoffs = append(handoffs, d)
	}
	var crashErr error
	for range sz.crashes {
		d, err := move(syscall.SIGKILL, leaseTTL+30*time.Second)
		if err != nil {
			crashErr = err
			break
		}
		e.logf("crash: %s", d)
		crashes = append(crashes, d)
	}
	// End the run and check it whole.
	if _, err := e.client.Cancel(ctx, runID); err != nil {
		return fail(err)
	}
	if _, err := e.waitRuns(ctx, term, []string{runID}, time.Minute); err != nil {
		return fail(err)
	}
	lines, err := e.checkChain(ctx, runID)
	once := fmt.Sprintf("exactly once: %d lines", lines)
	if err != nil {
		once = "NOT exactly once: " + err.Error()
	}
	ok := err == nil
	res := []Result{{
		Row: "hand-off", Target: handoffTarget,
		Measured: fmt.Sprintf("p50 %s, max %s (%d hand-offs; %s)", ms(median(handoffs)), ms(quantile(handoffs, 1)), len(handoffs), once),
		Pass:     verdict(ok && median(handoffs) <= 250*time.Millisecond),
	}}
	if crashErr != nil {
		return append(res, failed("crash", crashTarget, crashErr)...)
	}
	worst := quantile(crashes, 1)
	return append(res, Result{
		Row: "crash", Target: crashTarget,
		Measured: fmt.Sprintf("p50 %s, max %s (%d crashes; %s)", ms(median(crashes)), ms(worst), len(crashes), once),
		Pass:     verdict(ok && worst <= leaseTTL+time.Second),
	})
}

// waitLines waits until the current holder has published n lines.
func (e *env) waitLines(ctx context.Context, st *chainState, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st.mu.Lock()
		got := 0
		for _, l := range st.lines {
			if l.epoch == st.epoch {
				got++
			}
		}
		st.mu.Unlock()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the run's holder published %d lines in %s", got, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
