// Package chain is what the sandbox's two sides share: package sandbox,
// the worker's side, which lays a run out, spawns its runner chain and
// talks to it, and package stage, the runner chain's stages. Beside the
// run's spec (package runspec), it is the one vocabulary of the run
// directory and the wire between them, so that the stages never import
// the worker's side, and the worker's side takes from the stages only
// their table and what its doctor checks:
//
//   - the spec file as the stages read it (ReadSpec, ReadFile) and the
//     JSON every record of the chain is written in (MustJSON);
//   - the run's lock, which the runner holds for its life (LockRun) and
//     anyone probes (Flock), and its pid file (WritePIDFile, ParsePID);
//   - the stages' names and environment, and the stop signals a spawner
//     holds for them (HoldStops);
//   - the words of the readiness pipe and the pool socket, a take's line
//     (AgentTake), whether a run fits a prestarted sandbox (Fits), and
//     the state record of one that waits for its take (PoolWaitPhase);
//   - the network a spec needs (NetMode) and the proxy's environment;
//   - the input socket's path and frames (InputMessage, InputState).
//
// It imports runspec and the journal, never either side. Syscall code
// lives in *_linux.go; the rest is unit tested without privileges.
package chain
