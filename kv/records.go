package kv

import (
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/policy"
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
	// Events is the profile's events dialect (agui.Dialect), so that a
	// reader projects the run's chain as its worker's config says.
	Events string `msgpack:"events,omitempty"`
	// Policy is the run's policy for permission prompts (the profile's,
	// narrowed by the job's; nil: prompts are passed through), and
	// AskTimeout how long an ask waits for a person: the holder decides
	// by them, and a successor decides as the first holder did.
	Policy     *policy.Policy `msgpack:"policy,omitempty"`
	AskTimeout time.Duration  `msgpack:"askTimeout,omitempty"`
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
	// Key is the run's concurrency key (its job's concurrencyKey, or the
	// tenantLabel's value), "" for none.
	Key string `msgpack:"key,omitempty"`
	// Job is the job as submitted (JSON), kept unless it is over
	// protocol.MaxKeptJob or half the server's max payload: a run lost with
	// its node starts again from it (Retries > 0 only with a kept job), and
	// a person re-runs it (client.Rerun).
	Retries int    `msgpack:"retries,omitempty"`
	Job     []byte `msgpack:"job,omitempty"`
	// Input is the start of the job's input (InputPreview): what a viewer
	// shows as the run's first turn.
	Input string `msgpack:"input,omitempty"`
	// PauseAfter is the profile's session.pauseAfter: a session's run
	// that waits for input that long is paused (its holder sets
	// PauseRequested, then stops the agent as an idle one: the run ends
	// "paused", not "timeout").
	PauseAfter     time.Duration `msgpack:"pauseAfter,omitempty"`
	PauseRequested bool          `msgpack:"pauseRequested,omitempty"`
	// Session is the session the run is a turn of; Checkpoint, once the
	// run ended, the checkpoint its terminal status named (so a worker
	// can finish the session's end a holder that died began).
	Session    string             `msgpack:"session,omitempty"`
	Checkpoint *SessionCheckpoint `msgpack:"checkpoint,omitempty"`
	// Spawning is set, by compare-and-set, by the worker about to spawn the
	// run's runner, once its directory exists on Node. A run still starting
	// without it never had a runner, and the worker its job is redelivered
	// to, of any node, may take it over (I3: the CAS lets only one spawn).
	Spawning bool `msgpack:"spawning,omitempty"`
	// Usage, once the run ended, is the usage its terminal status
	// carried.
	Usage *protocol.Usage `msgpack:"usage,omitempty"`
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

// SessionState is a session's state in its record.
type SessionState string

const (
	SessionActive  SessionState = "active"  // a run of it is live, in a turn
	SessionWaiting SessionState = "waiting" // its live run waits for input
	SessionPaused  SessionState = "paused"  // its last run paused; the next continues it
	SessionIdle    SessionState = "idle"    // no run of it is live
)

// SessionRecord is the value of a session's key in the sessions bucket
// (msgpack): one conversation with its workspace and agent state, spread
// over runs. Only workers write it; clients read it.
type SessionRecord struct {
	ID      string       `msgpack:"id"`
	Profile string       `msgpack:"profile"`
	State   SessionState `msgpack:"state"`
	// Live is the run of the session that may be running (at most one
	// across the cluster): set by compare-and-set before the run's record
	// is created, cleared once its terminal status is out.
	Live string `msgpack:"live,omitempty"`
	// LiveSince is when Live was claimed.
	LiveSince time.Time `msgpack:"liveSince,omitempty"`
	// Runs are the session's last runs, oldest first (RunCount counts
	// them all).
	Runs     []string `msgpack:"runs,omitempty"`
	RunCount int      `msgpack:"runCount"`
	// Checkpoints are the checkpoints kept, oldest first; the last is the
	// head, which the next run starts from.
	Checkpoints []SessionCheckpoint `msgpack:"checkpoints,omitempty"`
	// ForkedFrom names the session and checkpoint this one was forked
	// from.
	ForkedFrom *SessionFork `msgpack:"forkedFrom,omitempty"`
	// Lent lists, for each checkpoint object of this session that forks'
	// checkpoints use, the sessions using it: it is deleted only once
	// none does.
	Lent map[string][]string `msgpack:"lent,omitempty"`
	// LostRun is the last run whose work was lost with its node (the
	// session continues from its checkpoint before it); CheckpointError
	// says why its last run's checkpoint failed.
	LostRun         string            `msgpack:"lostRun,omitempty"`
	CheckpointError string            `msgpack:"checkpointError,omitempty"`
	Labels          map[string]string `msgpack:"labels,omitempty"`
	// Usage sums the usage of the session's ended runs (each added once,
	// as its end clears Live).
	Usage protocol.Usage `msgpack:"usage,omitempty"`
	// Deleted marks a session deleted while forks still use its
	// checkpoint objects: it is gone for clients, and its record goes
	// with the last of them.
	Deleted   bool      `msgpack:"deleted,omitempty"`
	CreatedAt time.Time `msgpack:"createdAt"`
	UpdatedAt time.Time `msgpack:"updatedAt"`
}

// Head is the session's last checkpoint, nil when it has none.
func (r *SessionRecord) Head() *SessionCheckpoint {
	if len(r.Checkpoints) == 0 {
		return nil
	}
	return &r.Checkpoints[len(r.Checkpoints)-1]
}

// SessionCheckpoint is one checkpoint a session keeps.
type SessionCheckpoint struct {
	// N numbers it in its session (a fork's first is 0: the checkpoint
	// it was forked from).
	N         int       `msgpack:"n"`
	Object    string    `msgpack:"object"`
	Digest    string    `msgpack:"digest"`
	Size      uint64    `msgpack:"size"`
	Files     int       `msgpack:"files"`
	TreeBytes int64     `msgpack:"treeBytes"`
	Run       string    `msgpack:"run"`
	Setup     bool      `msgpack:"setup,omitempty"`
	Created   time.Time `msgpack:"created"`
	// Chain names the data objects a restore reads, base first.
	Chain []string `msgpack:"chain"`
}

// Wire is c as a status or a client shows it.
func (c SessionCheckpoint) Wire() protocol.Checkpoint {
	return protocol.Checkpoint{Object: c.Object, Digest: c.Digest, Size: c.Size, Files: c.Files, TreeBytes: c.TreeBytes,
		Base: len(c.Chain) == 1, Run: c.Run, Setup: c.Setup, Created: c.Created}
}

// SessionFork names the checkpoint a session was forked from.
type SessionFork struct {
	Session    string `msgpack:"session" json:"session"`
	Checkpoint int    `msgpack:"checkpoint" json:"checkpoint"`
}
