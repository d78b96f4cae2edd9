package protocol

// CancelSubject is where a cancel request for runID goes. Workers answer it
// in one queue group: the one that gets it checks the run and records the
// intent in its record (see CancelReply).
func (n Names) CancelSubject(runID string) string { return n.prefix + ".control.cancel." + runID }

// CancelRequests is the subject workers answer cancel requests on.
func (n Names) CancelRequests() string { return n.prefix + ".control.cancel.*" }

// CancelledSubject is where the worker that recorded a cancel intent tells
// every worker, so the one holding the run stops it at once. Only workers
// publish there; the intent in the record is what counts.
func (n Names) CancelledSubject(runID string) string {
	return n.prefix + ".control.cancelled." + runID
}

// CancelledNotices is the subject every worker listens on for CancelledSubject.
func (n Names) CancelledNotices() string { return n.prefix + ".control.cancelled.*" }

// CancelReply is a worker's answer to a cancel request that was recorded:
// the run's record after the intent was written.
type CancelReply struct {
	RunID  string `json:"runId"`
	State  string `json:"state"`
	Node   string `json:"node"`
	Worker string `json:"worker,omitempty"`
}

// Error codes of a refused cancel request, in the reply's
// Nats-Service-Error-Code header (the description is in Nats-Service-Error).
const (
	CancelBadRunID = "400" // the subject's last token is not a valid runId
	CancelNotFound = "404" // no run record has that runId
	CancelTerminal = "409" // the run has already ended
	CancelFailed   = "503" // the record could not be read or written; try again
)
