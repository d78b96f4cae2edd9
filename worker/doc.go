// Package worker owns a baton worker's runs: it provisions NATS resources,
// takes jobs from the consumer, creates each run's record and lease, starts
// the runner chain, follows the journal and publishes every line on the
// run's fenced chain, keeps its liveness (and so its leases) renewed,
// heartbeats its node, honours cancel requests, and ends each run with
// exactly one terminal status.
//
// # Services
//
// What the worker does beside its runs is a list of services (services.go),
// which Worker.Run prepares in order and then starts, all before the worker
// is ready, and waits for as it stops. Each is a small type holding only
// what it needs: its stores, the node, the state directory, a logger, the
// metrics it moves and the worker's clock (internal/clock), which a test
// replaces with a clock it moves itself. Where a service acts on a run, it
// calls back into run handling through a func or a narrow interface, never
// the Worker:
//
//   - heartbeat (beats.go) puts the node's entry every leaseTTL/3 and keeps
//     the node's longest gap between two beats;
//   - the cancel and input notice watchers, one noticeWatcher type
//     (notice.go), mark the held runs other workers tell them of, and sweep
//     the held runs when the connection comes back;
//   - recovery (recover.go) opens the leases watch before the worker is
//     ready, scans the state directory every half lease TTL, and offers the
//     runs nobody publishes for re-attach (recoveryRuns: request an attach,
//     mark a run finished, stop a lost run's agent);
//   - siblings (siblings_linux.go) watches the processes of the node's
//     other workers and ends the liveness of one that died;
//   - the reaper (nodes.go) marks lost the runs of nodes gone past the grace
//     (markLost), finding them in the node index;
//   - the pruner (prune.go) removes finished runs past the retention and the
//     binaries of earlier deploys;
//   - stalePoolEntries (pool.go) and finishedWorkspaces (discard.go) clean
//     up, once, what a killed predecessor left;
//   - one chainPool (pool.go) per profile with a pool keeps its sandboxes
//     started ahead of the jobs.
//
// The liveness (package lease) runs on the same clock.
package worker
