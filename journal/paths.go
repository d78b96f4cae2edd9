package journal

import "path/filepath"

// Dir is a run directory on a node: everything the runner and the worker
// keep about one run.
type Dir string

// Journal is the append-only file of the agent's stdout, ended by the sentinel.
func (d Dir) Journal() string { return filepath.Join(string(d), "journal.ndjson") }

// Stderr is the sidecar file of the agent's stderr.
func (d Dir) Stderr() string { return filepath.Join(string(d), "stderr.log") }

// State is the runner's NDJSON diagnostics, one fsynced record per phase.
func (d Dir) State() string { return filepath.Join(string(d), "state.ndjson") }

// Spec is the runner's spec (0600: it holds the nonce and the environment).
func (d Dir) Spec() string { return filepath.Join(string(d), "spec.json") }

// Lock is the file the runner holds an flock on for its whole life.
func (d Dir) Lock() string { return filepath.Join(string(d), "runner.lock") }

// PID holds the runner-outer's pid, for signalling it.
func (d Dir) PID() string { return filepath.Join(string(d), "runner.pid") }

// Input is the agent's stdin content (0600).
func (d Dir) Input() string { return filepath.Join(string(d), "input") }

// Workspace is the agent's working directory.
func (d Dir) Workspace() string { return filepath.Join(string(d), "workspace") }

// Finished marks a run whose terminal status is published and recorded, so
// recovery scans skip it without asking NATS.
func (d Dir) Finished() string { return filepath.Join(string(d), "finished") }
