package protocol

import (
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/batonhq/baton/internal/runid"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "baton"

// Names derives every subject, stream and bucket name from one prefix, so two
// baton deployments can share a NATS account without colliding.
type Names struct {
	prefix string // subject prefix, e.g. "baton"
	upper  string // resource prefix, e.g. "BATON"
}

// NewNames returns the names for prefix; an empty prefix means DefaultPrefix.
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !validToken(prefix) {
		return Names{}, fmt.Errorf("%w: prefix %q must match %s", ErrInvalidName, prefix, tokenPattern)
	}
	return Names{prefix: prefix, upper: strings.ToUpper(strings.ReplaceAll(prefix, "-", "_"))}, nil
}

// MustNames is NewNames for constant prefixes.
func MustNames(prefix string) Names {
	n, err := NewNames(prefix)
	if err != nil {
		panic(err)
	}
	return n
}

// Prefix returns the subject prefix.
func (n Names) Prefix() string { return n.prefix }

// JobsStream is the WorkQueue stream holding run and attach jobs.
func (n Names) JobsStream() string { return n.upper + "_JOBS" }

// EventsStream is the stream holding every run's chain of messages.
func (n Names) EventsStream() string { return n.upper + "_EVENTS" }

// DLQStream is the stream holding rejected jobs.
func (n Names) DLQStream() string { return n.upper + "_DLQ" }

// RunsBucket is the KV bucket of run records.
func (n Names) RunsBucket() string { return n.upper + "_RUNS" }

// LeasesBucket is the KV bucket of per-run leases.
func (n Names) LeasesBucket() string { return n.upper + "_LEASES" }

// NodeRunsBucket is the KV bucket indexing unfinished runs by node: a key
// "<node>.<runId>" per run, from its start to its end, so the node-loss
// reaper finds a node's runs without reading every record.
func (n Names) NodeRunsBucket() string { return n.upper + "_NODE_RUNS" }

// OutputsBucket is the Object Store bucket of runs' captured outputs:
// "<runId>/diff.patch" and "<runId>/files/<path>".
func (n Names) OutputsBucket() string { return n.upper + "_OUTPUTS" }

// WorkspacesStream is the append-only stream of workspace archives a job
// names (Job.Workspace): tars, optionally gzipped, stored by their content
// (see WorkspaceChunkSubject).
func (n Names) WorkspacesStream() string { return n.upper + "_WORKSPACES" }

// SessionsBucket is the KV bucket of session records, keyed by session id.
func (n Names) SessionsBucket() string { return n.upper + "_SESSIONS" }

// CheckpointsBucket is the Object Store bucket of sessions' checkpoints:
// "<session>/<runId>" and its manifest (see package checkpoint).
func (n Names) CheckpointsBucket() string { return n.upper + "_CHECKPOINTS" }

// NodeRunKey is the key of runID in NodeRunsBucket.
func NodeRunKey(node, runID string) string { return node + "." + runID }

// NodesBucket is the KV bucket of node heartbeats.
func (n Names) NodesBucket() string { return n.upper + "_NODES" }

// RunJobSubject is where new runs are submitted.
func (n Names) RunJobSubject() string { return n.prefix + ".jobs.run" }

// RetryJobSubject is where workers submit the next attempt of a lost run.
// Only workers publish here, so only jobs from here may carry the reserved
// baton.* labels.
func (n Names) RetryJobSubject() string { return n.prefix + ".jobs.retry" }

// AttachJobSubject is where re-attach jobs for one node's runs go.
func (n Names) AttachJobSubject(node string) string { return n.prefix + ".jobs.attach." + node }

// SessionJobSubject is where the runs of session go: the jobs stream keeps
// them in submission order, and a worker starts one only when it is the
// first left on its subject and the session has no live run.
func (n Names) SessionJobSubject(session string) string { return n.prefix + ".jobs.session." + session }

// SessionJobs is the filter of every session's jobs.
func (n Names) SessionJobs() string { return n.prefix + ".jobs.session.*" }

// JobsSubjects are the subjects of the jobs stream.
func (n Names) JobsSubjects() []string {
	return []string{n.RunJobSubject(), n.RetryJobSubject(), n.prefix + ".jobs.attach.*", n.SessionJobs(), n.KeyJobs()}
}

// IngestSubjects are the subjects of the events stream: workers publish a
// run's chain on "<prefix>.ingest.<runId>.<kind>"; the stream stores each
// message as "<prefix>.runs.<runId>.<kind>" (see RunsSubjects) and
// republishes it there once stored. So a core subscriber of a run's
// subjects sees only what the chain accepted: never a retried duplicate
// nor a fenced-off zombie's message.
func (n Names) IngestSubjects() []string { return []string{n.prefix + ".ingest.*.*"} }

// RunsSubjects is what the events stream stores and republishes: every
// run's subjects.
func (n Names) RunsSubjects() string { return n.prefix + ".runs.>" }

// IngestSubject is where a worker publishes a run's messages of kind.
func (n Names) IngestSubject(runID string, kind RunKind) string {
	return n.prefix + ".ingest." + runID + "." + string(kind)
}

// RunFilter is the filter naming a run's whole chain; every fenced publish of
// the run expects the last sequence of this exact filter string.
func (n Names) RunFilter(runID string) string { return n.prefix + ".runs." + runID + ".>" }

// EventsSubject carries the agent's JSON lines.
func (n Names) EventsSubject(runID string) string { return n.prefix + ".runs." + runID + ".events" }

// RawSubject carries the agent's lines that are not JSON.
func (n Names) RawSubject(runID string) string { return n.prefix + ".runs." + runID + ".raw" }

// StatusSubject carries lifecycle statuses.
func (n Names) StatusSubject(runID string) string { return n.prefix + ".runs." + runID + ".status" }

// DLQSubject is where a job rejected for reason is kept.
func (n Names) DLQSubject(reason Reason) string { return n.prefix + ".dlq." + string(reason) }

// DLQSubjects are the subjects of the DLQ stream.
func (n Names) DLQSubjects() []string { return []string{n.prefix + ".dlq.>"} }

// RunKind tells which of a run's subjects a message was published on.
type RunKind string

const (
	KindEvents RunKind = "events"
	KindRaw    RunKind = "raw"
	KindStatus RunKind = "status"
)

// ParseRunSubject splits "<prefix>.runs.<runId>.<kind>".
func (n Names) ParseRunSubject(subject string) (runID string, kind RunKind, ok bool) {
	rest, found := strings.CutPrefix(subject, n.prefix+".runs.")
	if !found {
		return "", "", false
	}
	runID, k, found := strings.Cut(rest, ".")
	if !found || !ValidRunID(runID) {
		return "", "", false
	}
	switch RunKind(k) {
	case KindEvents, KindRaw, KindStatus, KindInput, KindEgress, KindTool:
		return runID, RunKind(k), true
	}
	return "", "", false
}

// tokenPattern is what a prefix or node id must match.
const tokenPattern = "[A-Za-z0-9_-]{1,64}"

// validToken reports whether s matches tokenPattern.
func validToken(s string) bool { return validChars(s, 64, "_-") }

// validChars reports whether s is 1 to maxLen ASCII letters, digits and
// bytes of extra.
func validChars(s string, maxLen int, extra string) bool { return runid.Chars(s, maxLen, extra) }

// ValidRunID reports whether id can name a run: one subject token of
// [A-Za-z0-9_-], at most 128 bytes.
func ValidRunID(id string) bool { return runid.Valid(id) }

// ValidSessionID reports whether id can name a session: one subject
// token of [A-Za-z0-9_-], at most 128 bytes, as a runId.
func ValidSessionID(id string) bool { return runid.Valid(id) }

// NewRunID returns a new run id: "run-" and 20 random base32 characters
// (100 bits), as baton submit and the console name runs.
func NewRunID() string {
	return "run-" + strings.ToLower(rand.Text()[:20])
}

// ValidNodeID reports whether id can name a node (one subject token).
func ValidNodeID(id string) bool { return validToken(id) }

// NodeIDFrom turns a host name into a node id by replacing every character
// that cannot stand in a subject token.
func NodeIDFrom(host string) string {
	b := []byte(host)
	for i, c := range b {
		ok := c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "node"
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
