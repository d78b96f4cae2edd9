package kv

import (
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/protocol"
)

// RunState is the state kept in a run record. Besides the terminal
// protocol statuses it has the states before a run ends.
type RunState string

const (
	RunStarting RunState = "starting" // record created, runner not yet known to be up
	RunRunning  RunState = "running"  // runner spawned
)

// inputPreviewBytes bounds RunRecord.Input: a record is one message, and
// a job's input can be megabytes.
const inputPreviewBytes = 1024

// InputPreview is the start of input that a record keeps: at most 1 KiB,
// cut at a character, with "…" when cut.
func InputPreview(input string) string {
	if len(input) <= inputPreviewBytes {
		return input
	}
	cut := inputPreviewBytes
	for cut > 0 && !utf8.RuneStart(input[cut]) {
		cut--
	}
	return input[:cut] + "…"
}

// Terminal reports whether the run has ended.
func (s RunState) Terminal() bool { return protocol.StatusType(s).Terminal() }

// RunRecord is the value of a run's key in the runs bucket (msgpack). It
// holds none of baton's secrets: clients read it. The journal's nonce is
// kept only in the run directory's spec (a "nonce" field in records written
// by older versions is ignored). The job it keeps is the submitter's, env
// included.
type RunRecord struct {
	RunID           string    `msgpack:"runId"`
	State           RunState  `msgpack:"state"`
	Node            string    `msgpack:"node"`
	Worker          string    `msgpack:"worker,omitempty"`
	Profile         string    `msgpack:"profile"`
	Attempt         int       `msgpack:"attempt"`
	Deadline        time.Time `msgpack:"deadline,omitempty"`
	CancelRequested bool      `msgpack:"cancelRequested,omitempty"`
	// Interactive: the run's profile has stdin "stream", so it takes input
	// messages.
	Interactive bool `msgpack:"interactive,omitempty"`
	// TurnEndField and TurnEndEquals are the profile's turnEnd, IdleTimeout
	// its idleTimeout: the holder publishes "waiting" and "running" from
	// them and ends a run idle too long.
	TurnEndField  string        `msgpack:"turnEndField,omitempty"`
	TurnEndEquals string        `msgpack:"turnEndEquals,omitempty"`
	IdleTimeout   time.Duration `msgpack:"idleTimeout,omitempty"`
	// WaitingSince is when the agent began to wait for input (after a
	// turn-end line); zero while it runs. The holder writes it before its
	// "waiting" status, so a successor restates "waiting" and runs the
	// idle clock on from then.
	WaitingSince time.Time         `msgpack:"waitingSince,omitempty"`
	CreatedAt    time.Time         `msgpack:"createdAt"`
	StartedAt    time.Time         `msgpack:"startedAt,omitempty"`
	FinishedAt   time.Time         `msgpack:"finishedAt,omitempty"`
	ExitCode     *int              `msgpack:"exitCode,omitempty"`
	Reason       string            `msgpack:"reason,omitempty"`
	Offset       int64             `msgpack:"offset"`
	LastSeq      uint64            `msgpack:"lastSeq"`
	Labels       map[string]string `msgpack:"labels,omitempty"`
	// Job is the job as submitted (JSON), kept unless it is over
	// protocol.MaxKeptJob or half the server's max payload: a run lost with
	// its node starts again from it (Retries > 0 only with a kept job), and
	// a person re-runs it (client.Rerun).
	Retries int    `msgpack:"retries,omitempty"`
	Job     []byte `msgpack:"job,omitempty"`
	// Input is the start of the job's input (InputPreview): what a viewer
	// shows as the run's first turn.
	Input string `msgpack:"input,omitempty"`
	// Spawning is set, by compare-and-set, by the worker about to spawn the
	// run's runner, once its directory exists on Node. A run still starting
	// without it never had a runner, and the worker its job is redelivered
	// to, of any node, may take it over (I3: the CAS lets only one spawn).
	Spawning bool `msgpack:"spawning,omitempty"`
}

// LeaseState tells whether a lease's holder still publishes the run.
type LeaseState string

const (
	LeaseHeld     LeaseState = "held"
	LeaseReleased LeaseState = "released"
)

// LeaseRecord is the value of a run's key in the leases bucket (msgpack).
// The KV revision of the write that took the lease is the epoch.
type LeaseRecord struct {
	Worker  string     `msgpack:"worker"`
	Node    string     `msgpack:"node"`
	Epoch   uint64     `msgpack:"epoch"`
	State   LeaseState `msgpack:"state"`
	Offset  int64      `msgpack:"offset"`
	LastSeq uint64     `msgpack:"lastSeq"`
	// Session is the holder's liveness session (LiveRecord.Session): a held
	// lease lives as long as its holder's liveness key carries it. Zero in
	// leases written by workers from before liveness keys, which renewed
	// each lease instead.
	Session uint64 `msgpack:"session,omitempty"`
}

// LiveRecord is the value of a worker's liveness key in the leases bucket
// (msgpack): renewed with a per-message TTL, it stands for every lease the
// worker holds in the session it names.
type LiveRecord struct {
	Worker  string `msgpack:"worker"`
	Node    string `msgpack:"node"`
	Session uint64 `msgpack:"session"`
}

// NodeRecord is a node's heartbeat in the nodes bucket (msgpack).
type NodeRecord struct {
	ID        string    `msgpack:"id"`
	Workers   int       `msgpack:"workers"`
	Capacity  int       `msgpack:"capacity"`
	Version   string    `msgpack:"version"`
	Heartbeat time.Time `msgpack:"heartbeat"`
}
