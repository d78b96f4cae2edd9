package client

import (
	"time"

	"github.com/batonhq/baton/kv"
)

// RunView is a run record as baton's commands and console show it, in
// JSON: times that were never set are left out rather than shown as the
// zero time, and the fields kept for the worker's own use are left out.
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
}

// NewRunView returns the view of r.
func NewRunView(r kv.RunRecord) RunView {
	t := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return RunView{
		RunID: r.RunID, State: r.State, Profile: r.Profile, Node: r.Node, Worker: r.Worker,
		Attempt: r.Attempt, CancelRequested: r.CancelRequested,
		CreatedAt: t(r.CreatedAt), StartedAt: t(r.StartedAt), FinishedAt: t(r.FinishedAt), Deadline: t(r.Deadline),
		ExitCode: r.ExitCode, Reason: r.Reason, Offset: r.Offset, LastSeq: r.LastSeq, Labels: r.Labels,
	}
}
