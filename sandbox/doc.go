// Package sandbox is the worker's side of the runner chain that runs one
// agent in isolation and journals its stdout.
//
// The worker calls Start, which prepares the run directory (see
// journal.Dir) and spawns `baton runner-outer` detached: its own session,
// stdio on /dev/null, no pipe kept, so the worker's death never reaches
// the agent. Start returns once the runner holds the run's flock and has
// started its chain, or with why it could not: a run whose profile needs
// what the host lacks does not start. Alive probes that flock and
// WatchRunner waits for its release; Cancel and StopIdle ask the runner
// to stop the agent; DialInput hands it the run's input messages.
// Prestart starts a chain ahead of its job, whose Take gives it a run;
// Respawn spawns the runner of a run laid out but never journaled.
// ReleaseWorkspace and DiscardWorkspace give back a root worker's
// bounded workspace. Doctor checks every prerequisite of the chain on
// this machine and says how to fix each.
//
// Below it, each importing only what lies lower:
//
//   - package runspec, the run's spec (Spec here), which Start writes and
//     every stage reads;
//   - package internal/stage, the runner chain's stages, which RunStage
//     runs (its package doc draws the chain);
//   - package internal/chain, what both sides share: the run's lock and
//     pid file, the stage names, the readiness pipe's and pool socket's
//     words, a take's line, the input socket and its frames;
//   - packages internal/egress and internal/seccomp, the egress proxy and
//     DNS stub, and the agent's syscall filter.
//
// Portable logic (the doctor's report and its checks' arithmetic, the
// reading of /proc/locks) is unit tested without privileges; syscall code
// lives in *_linux.go.
package sandbox
