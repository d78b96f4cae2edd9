package worker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
)

// A worker that records a cancel intent or stores input tells the run's
// holder on a core NATS subject every worker listens on (CancelledNotices,
// InputNotices). Core NATS may lose a message: while a client reconnects
// (each worker then looks at all its runs), when a subscriber falls behind
// (the handlers only mark a run and never wait), or between two servers
// of a cluster whose route is down. So a notice is a request that only the
// holder answers, and it is sent again until answered; the holder's look
// at every run it holds, every noticeSweep, is left for what no retry
// covers (the notifying worker dying at that instant, a route down for
// longer than its retries). Nothing is polled per run meanwhile.

// noticeTiming is how notify sends a notice again.
type noticeTiming struct {
	ackWait time.Duration // how long one try waits for the holder
	total   time.Duration // how long a notice is sent again
}

var defaultNoticeTiming = noticeTiming{ackWait: time.Second, total: 30 * time.Second}

// notify sends a notice on subject, again (1, 2, 4 ... s apart) until the
// run's holder answers, 30 s have passed or ctx ends. It does not wait.
// Nobody answering is no error: no worker may hold the run just now, and
// the one that takes it reads its record and its input first.
func (w *Worker) notify(ctx context.Context, subject string) {
	go func() {
		deadline := time.Now().Add(w.notice.total)
		pause := w.notice.ackWait
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, w.notice.ackWait)
			_, err := w.nc.RequestWithContext(rctx, subject, nil)
			cancel()
			if err == nil || time.Now().Add(pause).After(deadline) {
				return
			}
			clock.Sleep(ctx, pause)
			pause *= 2
		}
	}()
}

// ackNotice answers a notice, if its sender waits for an answer (a worker
// of a release before acknowledged notices does not).
func ackNotice(m *nats.Msg) {
	if m.Reply != "" {
		_ = m.Respond(nil)
	}
}

// noticeSweep is how often a worker looks at every run it holds for a
// cancel or an input it was not told of.
func (w *Worker) noticeSweep() time.Duration { return max(20*w.cfg.LeaseTTL, time.Minute) }

// noticeWatcher serves one kind of notice (cancels, inputs). A notice for a
// run this worker holds (held) is answered and the run marked; the marked
// runs go to onNotice from the watcher's own loop, since the subscription's
// handler must never wait: a burst (a whole pool's runs cancelled at once)
// is then never dropped as a slow consumer. onSweep looks at every run held
// when the connection comes back (notices sent meanwhile are lost) and, if
// every is set, that often.
type noticeWatcher struct {
	nc       *nats.Conn
	subject  string // a wildcard ending in the run id
	what     string // in logs: "cancel", "input"
	held     func(runID string) bool
	onNotice func(ctx context.Context, runID string)
	onSweep  func(ctx context.Context)
	every    time.Duration // 0: no periodic sweep
	log      zerolog.Logger
	clock    clock.Clock // what the sweeps are timed on
}

func (nw noticeWatcher) run(ctx context.Context) {
	var (
		mu     sync.Mutex
		marked = map[string]bool{}
		wake   = make(chan struct{}, 1)
	)
	sub, err := nw.nc.Subscribe(nw.subject, func(m *nats.Msg) {
		runID := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		if !nw.held(runID) {
			return // another worker's: it answers
		}
		mu.Lock()
		marked[runID] = true
		mu.Unlock()
		ackNotice(m)
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		nw.log.Error().Err(err).Msgf("subscribe to %s notices; they are applied only by the sweeps", nw.what)
	} else {
		defer sub.Unsubscribe()
	}
	reconnects := nw.nc.StatusChanged(nats.CONNECTED)
	defer nw.nc.RemoveStatusListener(reconnects)
	var tick <-chan time.Time
	if nw.every > 0 {
		t := nw.clock.NewTicker(nw.every)
		defer t.Stop()
		tick = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			mu.Lock()
			ids := slices.Collect(maps.Keys(marked))
			clear(marked)
			mu.Unlock()
			for _, id := range ids {
				nw.onNotice(ctx, id)
			}
		case <-reconnects:
			nw.onSweep(ctx)
		case <-tick:
			nw.onSweep(ctx)
		}
	}
}
