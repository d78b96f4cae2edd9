// Package runspec is a run's spec: the file (Spec) the worker writes into
// the run directory and every stage of the runner chain reads, with the
// parts of it a profile sets (network policy, mounts, limits, outputs,
// stdin mode), their defaults, their JSON form and their validation. It
// plays the part runc's libcontainer/configs does: the one description
// of a sandbox that both its starter (package sandbox) and its runner
// stages read, and that imports neither.
//
// It imports the standard library, the run id's rules and the journal
// (a spec's nonce must be one that ends a journal): every stage of a run
// is a process that stays alive as long as the run, so what this package
// imports costs memory per run, and the runner links those two anyway.
// config, which parses the YAML a profile is written in, converts into
// these types.
package runspec
