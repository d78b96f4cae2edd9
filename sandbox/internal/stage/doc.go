// Package stage is the runner chain: the stages that run one agent in
// isolation and journal its stdout, each a subcommand of the baton and
// baton-runner binaries (Stages; Run runs one). Package sandbox, the
// worker's side, lays the run directory out and spawns runner-outer; it
// and the stages share only the run directory, the spec (package runspec)
// and the words, records and frames of package chain, and nothing here
// imports it. The stages' entry points (RunOuter … RunExec) say what
// each does.
//
// The chain:
//
//	runner-outer        host side: flock, journal, deadline, cancel, sentinel;
//	│                   resolves the profile's mounts and limits, then (root)
//	│                   drops to the sandbox uid for good; serves the egress
//	│                   proxy and DNS stub; runs pasta for CIDR allowlists;
//	│                   once the init is handed over, execs itself, same pid,
//	│ runner-outer-wait as the supervisor with a fresh heap (not with pasta)
//	└ runner-inner      uid 0 of a new user and network namespace: loopback,
//	  │                 the egress sockets, the nft ruleset, waits for pasta
//	  └ runner-inner-child  pid 1 of new user, mount, pid, ipc, uts and cgroup
//	    │                   namespaces: builds the agent's root on a tmpfs,
//	    │                   pivot_root, then execs itself, pid 1 still, as
//	    │ runner-init-wait  which starts the agent and reaps as init, with a
//	    │                   fresh heap; takes no signal
//	    └ runner-exec   the agent's uid in a user namespace of its own:
//	      │             empties its capabilities, sets the rlimits,
//	      │             no_new_privs and the seccomp filter, then execs
//	      └ agent       no capability, no host file but what its profile
//	                    mounts, no way out but the proxy
//
// runner-outer alone writes the agent's stdin, a pipe: the job's input,
// then closed (stdin "once"), or kept open (stdin "stream") for the input
// messages the worker hands it on the run directory's input socket, each
// written once, right after its predecessor, and recorded in the journal
// as a nonced input record between the agent's lines. Interrupts come on
// the same socket: SIGINT to the agent's process group, or the profile's
// interrupt line on stdin.
//
// runner-outer copies the agent's stdout pipe into the journal and ends it
// with the nonced sentinel: the agent's exit code (128+signal for a signal
// death) and the reason (exit, signal, timeout, cancel, error). The agent
// holds no descriptor of the journal, lock, spec or state files, and never
// sees the nonce. Every stage appends one record per phase to
// state.ndjson (fsynced when it is a failure). A run whose profile needs what the host lacks (pasta,
// a delegated cgroup, a mount source) does not start, and says why: no
// agent runs with less isolation than its profile asks for.
//
// Networks: "none" is loopback only. An allowlist of names is loopback
// only too, plus the proxy (127.0.0.1:3128, HTTP_PROXY) and DNS stub
// (127.0.0.1:53) on sockets made inside the namespace and served by
// runner-outer, which dials and resolves on the host after the egress
// policy (package sandbox/internal/egress) said yes. CIDR entries add
// pasta's tap, with an nft ruleset that drops everything but loopback and
// those CIDRs, never the host's own addresses. docs/sandbox.md has the
// whole design.
//
// Portable logic (the plan of each stage, rulesets, status lines, the
// sentinel's decision, argv and environment) is unit tested without
// privileges; syscall code lives in *_linux.go.
package stage
