package protocol

// WorkerService is the name of the NATS micro service every worker
// registers, so `nats micro ls` and
// `nats micro info baton-worker` list the fleet.
const WorkerService = "baton-worker"

// WorkerRun describes a run a worker holds, as its status endpoint reports.
type WorkerRun struct {
	RunID   string `json:"runId"`
	Epoch   uint64 `json:"epoch"`
	LastSeq uint64 `json:"lastSeq"`
}

// WorkerStatus is the reply of a worker's status endpoint
// (WorkerStatusSubject).
type WorkerStatus struct {
	Worker      string      `json:"worker"`
	Node        string      `json:"node"`
	Version     string      `json:"version"`
	Concurrency int         `json:"concurrency"`
	Runs        []WorkerRun `json:"runs"`
	// Free counts the slots free for a new run; FullProfiles names the
	// profiles at their maxConcurrent on this worker.
	Free         int      `json:"free"`
	FullProfiles []string `json:"fullProfiles,omitempty"`
}

// WorkerSubject is the group of worker id's own endpoints.
func (n Names) WorkerSubject(id string) string { return n.prefix + ".worker." + id }

// WorkerStatusSubject is where worker id answers with its WorkerStatus.
func (n Names) WorkerStatusSubject(id string) string { return n.WorkerSubject(id) + ".status" }
