// Package sandbox owns the runner chain that runs one agent in isolation
// and journals its stdout.
//
// The worker calls Start, which prepares the run directory (see
// journal.Dir) and spawns `baton runner-outer` detached: its own session,
// stdio on /dev/null, no pipe kept, so the worker's death never reaches
// the agent. Start returns once the runner holds the run's flock and has
// started its chain. Alive probes that flock; Cancel asks the runner to
// stop the agent.
//
// The chain:
//
//	runner-outer        host side: flock, journal, deadline, cancel, sentinel
//	└ runner-inner      checks the network policy, clones the sandbox
//	  └ runner-inner-child  pid 1 of new user, mount, pid, ipc, uts and net
//	    │                   namespaces: private mounts, run directories
//	    │                   hidden, fresh /proc, loopback up, hostname
//	    └ agent             own process group and user namespace, uid
//	                        AgentUID inside, no capabilities
//
// runner-outer copies the agent's stdout pipe into the journal and ends it
// with the nonced sentinel: the agent's exit code (128+signal for a signal
// death) and the reason (exit, signal, timeout, cancel, error). The agent
// holds no descriptor of the journal, lock, spec or state files, and never
// sees the nonce. Every stage appends one fsynced record per phase to
// state.ndjson.
//
// A root runner maps the sandbox's uid 0 to the spec's sandbox uid
// (default 65534), never to host root; anyone else maps it to themselves.
// Pid 1 of the sandbox is a Go program whose threads take the pids after
// it, so the agent's pid is small but not 2.
//
// Not yet: egress allowlists (refused with ErrNetworkUnsupported),
// pivot_root into a built root (the agent sees the host's filesystem,
// less the node's run directories, with its sandbox uid's permissions),
// seccomp, no_new_privs, rlimits and cgroups.
//
// Portable logic (spec validation, status lines, sentinel mapping, argv
// and environment, layout) is unit tested without privileges; syscall code
// lives in *_linux.go.
package sandbox
