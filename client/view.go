package client

import (
	"encoding/json"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// RunView is a run record as baton's commands and console show it, in
// JSON: every field of the record (docs/protocol.md, Run records), under
// the same names, but times that were never set are left out rather than
// shown as the zero time, the idle timeout is a duration string, and the
// kept job is its JSON.
type RunView struct {
	RunID           string            `json:"runId"`
	State           kv.RunState       `json:"state"`
	Profile         string            `json:"profile"`
	Node            string            `json:"node"`
	Worker          string            `json:"worker,omitempty"`
	Attempt         int               `json:"attempt"`
	CancelRequested bool              `json:"cancelRequested"`
	CreatedAt       *time.Time        `json:"createdAt,omitempty"`
	StartedAt       *time.Time        `json:"startedAt,omitempty"`
	FinishedAt      *time.Time        `json:"finishedAt,omitempty"`
	Deadline        *time.Time        `json:"deadline,omitempty"`
	ExitCode        *int              `json:"exitCode,omitempty"`
	Reason          string            `json:"reason,omitempty"`
	Offset          int64             `json:"offset"`
	LastSeq         uint64            `json:"lastSeq"`
	Labels          map[string]string `json:"labels,omitempty"`
	// Key is the run's concurrency key (docs/tenancy.md).
	Key string `json:"key,omitempty"`
	// Input is the start of the job's input (its first 1 KiB).
	Input string `json:"input,omitempty"`
	// Retries and Job: the job as submitted, which a retry and a re-run
	// start from (absent when it was too large to keep).
	Retries int             `json:"retries,omitempty"`
	Job     json.RawMessage `json:"job,omitempty"`
	// An interactive run's turn end, idle timeout, and since when its agent
	// waits for input.
	Interactive   bool              `json:"interactive,omitempty"`
	TurnEndField  string            `json:"turnEndField,omitempty"`
	TurnEndEquals string            `json:"turnEndEquals,omitempty"`
	IdleTimeout   protocol.Duration `json:"idleTimeout,omitempty"`
	WaitingSince  *time.Time        `json:"waitingSince,omitempty"`
	// Spawning is set only while a worker spawns the run's runner.
	Spawning bool `json:"spawning,omitempty"`
	// Session is the session the run is a turn of, and Checkpoint the
	// checkpoint its end stored; PauseAfter its profile's pauseAfter and
	// PauseRequested whether its holder paused it.
	Session        string               `json:"session,omitempty"`
	Checkpoint     *protocol.Checkpoint `json:"checkpoint,omitempty"`
	PauseAfter     protocol.Duration    `json:"pauseAfter,omitempty"`
	PauseRequested bool                 `json:"pauseRequested,omitempty"`
	// Events is the profile's events dialect (docs/agui.md).
	Events string `json:"events,omitempty"`
	// Policy decides the run's permission prompts (the profile's, narrowed
	// by the job's), AskTimeout how long an ask waits for a person.
	Policy     *policy.Policy    `json:"policy,omitempty"`
	AskTimeout protocol.Duration `json:"askTimeout,omitempty"`
	// Usage, once the run ended, is what it used (docs/protocol.md).
	Usage *protocol.Usage `json:"usage,omitempty"`
}

// NewRunView returns the view of r.
func NewRunView(r kv.RunRecord) RunView {
	t := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	v := RunView{
		RunID: r.RunID, State: r.State, Profile: r.Profile, Node: r.Node, Worker: r.Worker,
		Attempt: r.Attempt, CancelRequested: r.CancelRequested,
		CreatedAt: t(r.CreatedAt), StartedAt: t(r.StartedAt), FinishedAt: t(r.FinishedAt), Deadline: t(r.Deadline),
		ExitCode: r.ExitCode, Reason: r.Reason, Offset: r.Offset, LastSeq: r.LastSeq, Labels: r.Labels,
		Key: r.Key, Input: r.Input, Retries: r.Retries,
		Interactive: r.Interactive, TurnEndField: r.TurnEndField, TurnEndEquals: r.TurnEndEquals,
		IdleTimeout: protocol.Duration(r.IdleTimeout), WaitingSince: t(r.WaitingSince), Spawning: r.Spawning,
		Session: r.Session, Checkpoint: checkpointWire(r.Checkpoint),
		PauseAfter: protocol.Duration(r.PauseAfter), PauseRequested: r.PauseRequested, Events: r.Events,
		Policy: r.Policy, AskTimeout: protocol.Duration(r.AskTimeout),
		Usage: r.Usage,
	}
	if json.Valid(r.Job) {
		v.Job = r.Job
	}
	return v
}

func checkpointWire(c *kv.SessionCheckpoint) *protocol.Checkpoint {
	if c == nil {
		return nil
	}
	w := c.Wire()
	return &w
}

// SessionView is a session record as baton's commands and console show
// it, in JSON.
type SessionView struct {
	ID       string          `json:"id"`
	Profile  string          `json:"profile"`
	State    kv.SessionState `json:"state"`
	Live     string          `json:"live,omitempty"`
	Runs     []string        `json:"runs"`
	RunCount int             `json:"runCount"`
	// Head is the checkpoint the session's next run starts from; the
	// Checkpoints kept, oldest first, end with it.
	Head            *CheckpointView   `json:"head,omitempty"`
	Checkpoints     []CheckpointView  `json:"checkpoints"`
	ForkedFrom      *kv.SessionFork   `json:"forkedFrom,omitempty"`
	LostRun         string            `json:"lostRun,omitempty"`
	CheckpointError string            `json:"checkpointError,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	// Usage sums the usage of the session's ended runs.
	Usage     protocol.Usage `json:"usage"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// CheckpointView is one checkpoint a session keeps, numbered in it.
type CheckpointView struct {
	N int `json:"n"`
	protocol.Checkpoint
}

// NewSessionView returns the view of r.
func NewSessionView(r kv.SessionRecord) SessionView {
	v := SessionView{
		ID: r.ID, Profile: r.Profile, State: r.State, Live: r.Live, Runs: r.Runs, RunCount: r.RunCount,
		Checkpoints: make([]CheckpointView, len(r.Checkpoints)), ForkedFrom: r.ForkedFrom, LostRun: r.LostRun,
		CheckpointError: r.CheckpointError, Labels: r.Labels, Usage: r.Usage, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if v.Runs == nil {
		v.Runs = []string{}
	}
	for i, c := range r.Checkpoints {
		v.Checkpoints[i] = CheckpointView{N: c.N, Checkpoint: c.Wire()}
	}
	if n := len(v.Checkpoints); n > 0 {
		v.Head = &v.Checkpoints[n-1]
	}
	return v
}
