package protocol

import (
	"fmt"
	"strings"

	"github.com/batonhq/baton/policy"
)

// Job asks for a run. It arrives on RunJobSubject as JSON, or as msgpack when
// the Content-Type header is ContentTypeMsgpack. Unknown fields are rejected.
type Job struct {
	// RunID names the run: one subject token, [A-Za-z0-9_-]{1,128}.
	RunID string `json:"runId" msgpack:"runId"`
	// Profile names a profile of the worker's configuration.
	Profile string `json:"profile" msgpack:"profile"`
	// Input is written to the agent's stdin, then stdin is closed.
	Input string `json:"input,omitempty" msgpack:"input,omitempty"`
	// Args go into the profile's command where its allowArgs allows.
	Args []string `json:"args,omitempty" msgpack:"args,omitempty"`
	// Env sets variables the profile lists in allowEnv.
	Env map[string]string `json:"env,omitempty" msgpack:"env,omitempty"`
	// Timeout bounds the run ("90s", "10m"); it may only shorten the
	// profile's timeout.
	Timeout Duration `json:"timeout,omitempty" msgpack:"timeout,omitempty"`
	// Files are small seed files for the workspace: relative path to
	// content; a path after "~/" (HomeFilePrefix) is in the agent's home
	// instead (/home/agent: an agent's own configuration).
	Files map[string]string `json:"files,omitempty" msgpack:"files,omitempty"`
	// Labels are copied to the run record for the caller's bookkeeping.
	Labels map[string]string `json:"labels,omitempty" msgpack:"labels,omitempty"`
	// Retries is how many times a run lost with its node is started again,
	// as a new run named "<runId>-a<attempt>" (at most MaxRetries).
	Retries int `json:"retries,omitempty" msgpack:"retries,omitempty"`
	// Limits lower the profile's limits for this run, never raise them:
	// "output" (a size like "1MiB") caps what the agent prints on stdout,
	// "disk" the size of its workspace.
	Limits map[string]string `json:"limits,omitempty" msgpack:"limits,omitempty"`
	// Outputs narrows what the profile captures at the run's end.
	Outputs *JobOutputs `json:"outputs,omitempty" msgpack:"outputs,omitempty"`
	// Workspace names an archive of the workspaces stream extracted into
	// the workspace before the agent starts; Files are written over it.
	Workspace *WorkspaceRef `json:"workspace,omitempty" msgpack:"workspace,omitempty"`
	// Session makes the run one turn of that session (the first run
	// creates it): it starts from the session's last checkpoint, at most
	// one of its runs is live across the cluster, and its runs start in
	// the order their jobs were submitted on its subject
	// (Names.SessionJobSubject). [A-Za-z0-9_-]{1,128}.
	Session string `json:"session,omitempty" msgpack:"session,omitempty"`
	// Policy narrows the profile's policy for permission prompts (it may
	// deny or ask more, never allow more); a profile without a policy
	// refuses a job with one.
	Policy *policy.Policy `json:"policy,omitempty" msgpack:"policy,omitempty"`
	// ConcurrencyKey names whose job this is (a tenant, a user): the
	// cluster runs at most the configured number of one key's jobs at
	// once, and free slots go round-robin across the keys with jobs
	// waiting (see Names.KeyJobSubject). [A-Za-z0-9_-]{1,64}.
	ConcurrencyKey string `json:"concurrencyKey,omitempty" msgpack:"concurrencyKey,omitempty"`
	// Priority orders a key's waiting jobs: 1 (lowest) to 5 (highest),
	// then arrival; 0 is DefaultPriority.
	Priority int `json:"priority,omitempty" msgpack:"priority,omitempty"`
}

// Priorities a job may carry; a job without one has DefaultPriority.
const (
	MinPriority     = 1
	MaxPriority     = 5
	DefaultPriority = 3
)

// EffectivePriority is the job's priority, DefaultPriority when unset.
func (j Job) EffectivePriority() int {
	if j.Priority == 0 {
		return DefaultPriority
	}
	return j.Priority
}

// ValidConcurrencyKey reports whether k can name a concurrency key: one
// subject token of [A-Za-z0-9_-], at most 64 bytes.
func ValidConcurrencyKey(k string) bool { return validChars(k, 64, "_-") }

// JobLimitOutput is the job limit on the agent's stdout, in bytes.
const JobLimitOutput = "output"

// JobLimitDisk is the job limit on the run's workspace, in bytes.
const JobLimitDisk = "disk"

// JobLimitOutputs is the job limit on what the run's capture stores
// (diff and files), in bytes.
const JobLimitOutputs = "outputs"

// OutputsLimit is the job's outputs limit in bytes, 0 when it sets none. A
// validated job's is well-formed.
func (j Job) OutputsLimit() uint64 {
	n, _ := ParseByteSize(j.Limits[JobLimitOutputs])
	return n
}

// DiskLimit is the job's disk limit in bytes, 0 when it sets none. A
// validated job's is well-formed.
func (j Job) DiskLimit() uint64 {
	n, _ := ParseByteSize(j.Limits[JobLimitDisk])
	return n
}

// OutputLimit is the job's output limit in bytes, 0 when it sets none. A
// validated job's is well-formed.
func (j Job) OutputLimit() uint64 {
	n, _ := ParseByteSize(j.Limits[JobLimitOutput])
	return n
}

// MaxKeptJob bounds the job a worker keeps in its run's record, for its
// retries and re-runs (kv.RunRecord.Job); a larger one is not kept, and
// neither is one over half the server's max payload.
const MaxKeptJob = 256 << 10

// Retry limits and the labels a retried run carries.
const (
	MaxRetries      = 10
	MaxRetriedRunID = 120
	// LabelRetryOf names the first run of a retried job; LabelAttempt is
	// the attempt number of a retry (2, 3, ...).
	LabelRetryOf = ReservedLabelPrefix + "retryOf"
	LabelAttempt = ReservedLabelPrefix + "attempt"
	// ReservedLabelPrefix starts the labels only baton sets; a job that
	// sets one itself is rejected.
	ReservedLabelPrefix = "baton."
)

// RetryRunID names attempt n (n ≥ 2) of the run first named first.
func RetryRunID(first string, n int) string { return fmt.Sprintf("%s-a%d", first, n) }

// HomeFilePrefix starts a job file's path that is in the agent's home
// rather than its workspace.
const HomeFilePrefix = "~/"

// SplitFiles splits a job's files into the workspace's and the home's,
// the latter without their HomeFilePrefix.
func SplitFiles(files map[string]string) (workspace, home map[string]string) {
	for p, c := range files {
		if rest, ok := strings.CutPrefix(p, HomeFilePrefix); ok {
			if home == nil {
				home = map[string]string{}
			}
			home[rest] = c
			continue
		}
		if workspace == nil {
			workspace = map[string]string{}
		}
		workspace[p] = c
	}
	return workspace, home
}
