// Package sandbox owns the runner chain that runs one agent in isolation and
// journals its stdout: the worker starts `baton runner-outer` detached
// (its own session, no pipes kept), which starts `runner-inner`, which clones
// `runner-inner-child` into new namespaces, which runs the agent. The runner
// holds an flock on the run's lock file for its whole life, appends the
// agent's stdout to the journal, enforces the deadline, and ends the journal
// with the nonced sentinel. Portable logic (spec, argv, guards) is unit
// tested without privileges; syscall code lives in *_linux.go.
package sandbox
