package protocol

import (
	"encoding/json"
	"time"
)

// StatusType is a run's lifecycle state as published on its status subject.
type StatusType string

const (
	StatusStarted   StatusType = "started"
	StatusAttached  StatusType = "attached"
	StatusHandoff   StatusType = "handoff"
	StatusSucceeded StatusType = "succeeded"
	StatusFailed    StatusType = "failed"
	StatusCancelled StatusType = "cancelled"
	StatusTimeout   StatusType = "timeout"
	StatusLost      StatusType = "lost"
	// StatusWaiting (a profile with turnEnd): the agent ended a turn and
	// waits for input. StatusRunning: input was written, a turn runs.
	StatusWaiting StatusType = "waiting"
	StatusRunning StatusType = "running"
	// StatusPaused (a session's run, with session.pauseAfter): the agent
	// waited for input that long, so its run was checkpointed and its
	// sandbox ended; the session's next run continues from there.
	StatusPaused StatusType = "paused"
)

// Terminal reports whether no message follows s on the run's chain.
func (s StatusType) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusTimeout, StatusLost, StatusPaused:
		return true
	}
	return false
}

// Status is the JSON body of a message on a run's status subject.
type Status struct {
	Status     StatusType `json:"status"`
	RunID      string     `json:"runId"`
	Worker     string     `json:"worker,omitempty"`
	Node       string     `json:"node,omitempty"`
	Epoch      uint64     `json:"epoch,omitempty"`
	Offset     int64      `json:"offset"`
	Attempt    int        `json:"attempt,omitempty"`
	ExitCode   *int       `json:"exitCode,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	StderrTail string     `json:"stderrTail,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	// RetriedAs, on a "lost" status, is the runId of the run's next
	// attempt, submitted before the status (see Job.Retries).
	RetriedAs string    `json:"retriedAs,omitempty"`
	Time      time.Time `json:"time"`
	// Outputs, on a terminal status, list what the run's capture stored,
	// all of it stored before the status is published.
	Outputs []Output `json:"outputs,omitempty"`
	// OutputsError says why the capture stopped short (a limit); the
	// run's own status is unchanged by it.
	OutputsError string `json:"outputsError,omitempty"`
	// OutputsNotes name what the capture skipped (a FIFO, a device).
	OutputsNotes []string `json:"outputsNotes,omitempty"`
	// Session is the session the run is a turn of; Checkpoint, on its
	// terminal status, the checkpoint stored before the status (the
	// session's head once the status is out), and CheckpointError why
	// none was (the session keeps its previous head).
	Session         string      `json:"session,omitempty"`
	Checkpoint      *Checkpoint `json:"checkpoint,omitempty"`
	CheckpointError string      `json:"checkpointError,omitempty"`
	// Usage, on a terminal status, is what the run used (nil on "lost":
	// its node, journal and runner are gone).
	Usage *Usage `json:"usage,omitempty"`
}

// Checkpoint is one checkpoint of a session's workspace and home in the
// checkpoints bucket (see Names.CheckpointsBucket).
type Checkpoint struct {
	// Object is its data object, "<session>/<runId>" (or with ".setup",
	// made after the session's setup); Digest and Size are the object's.
	Object string `json:"object"`
	Digest string `json:"digest"`
	Size   uint64 `json:"size"`
	// Files and TreeBytes are the regular files of the whole tree and
	// their bytes; Base tells a checkpoint holding the whole tree from
	// one holding what changed since the last.
	Files     int       `json:"files"`
	TreeBytes int64     `json:"treeBytes"`
	Base      bool      `json:"base,omitempty"`
	Run       string    `json:"run"`
	Setup     bool      `json:"setup,omitempty"`
	Created   time.Time `json:"created"`
}

// Marshal encodes s as JSON.
func (s Status) Marshal() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // every field is plainly encodable
	}
	return b
}

// ParseStatus decodes a status message body.
func ParseStatus(b []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return Status{}, err
	}
	return s, nil
}

// Output is one object a run's capture stored in the outputs bucket (see
// Names.OutputsBucket): "<runId>/diff.patch", or "<runId>/files/<sha256>"
// for the workspace file at Path (the hex SHA-256 of the path: no
// workspace path is ever in a subject).
type Output struct {
	Name string `json:"name"`
	// Path is a file's workspace path, escaped (outputs.EscapePath);
	// empty for the diff.
	Path string `json:"path,omitempty"`
	Size uint64 `json:"size"`
	// Digest is the object's SHA-256, as the Object Store writes it:
	// "SHA-256=" and the base64url of the sum.
	Digest string `json:"digest"`
}
