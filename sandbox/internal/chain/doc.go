// Package chain is what the sandbox's two sides share: package sandbox,
// the worker's side, which lays a run out, spawns its runner chain and
// talks to it, and package stage, the runner chain's stages. As runc's
// libcontainer/configs is the one description its starter and its init
// read, this is the one vocabulary of the wire and the run directory
// between them, so that neither side imports the other's code:
//
//   - the spec file as the stages read it (ReadSpec, ReadFile) and the
//     JSON every record of the chain is written in (MustJSON);
//   - the run's lock, which the runner holds for its life (LockRun) and
//     anyone probes (Flock), and its pid file (WritePIDFile, ParsePID);
//   - the stages' names and environment, and the stop signals a spawner
//     holds for them (HoldStops);
//   - the words of the readiness pipe and the pool socket, a take's line
//     (AgentTake) and whether a run fits a prestarted sandbox (Fits);
//   - the network a spec needs (NetMode) and the proxy's environment;
//   - the input socket's path and frames (InputMessage, InputState).
//
// It imports runspec and the journal, never either side. Syscall code
// lives in *_linux.go; the rest is unit tested without privileges.
package chain
