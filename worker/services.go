package worker

import (
	"context"
	"path/filepath"
	"sync"
)

// service is a background activity of the worker, a small type holding
// only what it needs (its stores, the node, the state directory, a logger,
// its metrics and the worker's clock) and calling back into run handling
// only through a narrow interface or a func.
type service struct {
	name string
	// prepare, if set, runs before the worker is ready and before any
	// service runs, in the list's order.
	prepare func(ctx context.Context)
	// run, if set, runs in the background until ctx ends, or until its
	// work is done (the one-off clean-ups).
	run func(ctx context.Context)
}

// startBackground prepares the worker's services, then starts them in bg,
// before the worker is ready.
func (w *Worker) startBackground(ctx context.Context, bg *sync.WaitGroup) {
	w.pools = w.newPools()
	services := w.services()
	for _, s := range services {
		if s.prepare != nil {
			s.prepare(ctx)
		}
	}
	for _, s := range services {
		if s.run == nil {
			continue
		}
		bg.Go(func() {
			s.run(ctx)
			w.log.Debug().Str("service", s.name).Msg("background service ended")
		})
	}
}

// services are the worker's background activities, the one list of them.
func (w *Worker) services() []service {
	beat := w.newHeartbeat()
	sibs := w.newSiblings()
	// The lease watch is opened before the siblings are looked at: one
	// dead before this worker started (a restart after a crash) has its
	// liveness ended at once, and the watch sees it end.
	rec := w.newRecovery(sibs.watch)
	runs := filepath.Join(w.stateDir, "runs")
	s := []service{
		{name: "heartbeat", prepare: beat.warnRecordedGap, run: beat.run},
		{name: "cancel notices", run: w.cancelNotices().run},
		{name: "input notices", run: w.inputNotices().run},
		{name: "recovery", prepare: rec.openWatch, run: rec.run},
		{name: "siblings", prepare: sibs.scan},
		{name: "reaper", run: w.newReaper(beat.lastFailure).run},
		{name: "pruner", run: w.pruner().run},
		{name: "stale pool entries", run: stalePoolEntries{runsDir: runs, log: w.log, clock: w.clock}.run},
		{name: "finished workspaces", run: finishedWorkspaces{runsDir: runs, log: w.log}.run},
		{name: "key slots", run: w.slots.Run},
		{name: "session expiry", run: sessionExpiry{sessions: w.sessions, maxAge: w.cfg.SessionsTTL(), log: w.log, clock: w.clock}.run},
	}
	for _, p := range w.pools {
		s = append(s, service{name: "pool " + p.profile, run: p.run})
	}
	return s
}
