// Package runspec holds the parts of a run's sandbox spec that a profile
// sets: network policy, mounts, limits, outputs and stdin mode, with their
// JSON form (the runner spec file) and their validation.
//
// It is a leaf: the standard library only. The runner chain (package
// sandbox, the baton-runner binary) links it, and every stage of a run is
// a process that stays alive as long as the run, so what this package
// imports costs memory per run; config, which parses the YAML a profile is
// written in, converts into these types.
package runspec
