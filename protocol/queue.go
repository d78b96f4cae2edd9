package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// KeyJobSubject is where a job of a concurrency key waits, in its key's
// lane of priority prio: "<prefix>.jobs.key.<key>.<prio>". Workers take
// the keys' lanes round-robin (weighted by the keyWeights of their
// configuration), a key's lanes highest priority first, each in arrival
// order. A publisher may publish a keyed job here directly; a keyed job
// published on RunJobSubject is moved here by the first worker that reads
// it. The job's own concurrencyKey and priority, not the subject, decide
// where it runs: a job whose subject disagrees is moved to its lane.
func (n Names) KeyJobSubject(key string, prio int) string {
	return n.prefix + ".jobs.key." + key + "." + strconv.Itoa(prio)
}

// KeyLanes is the filter of one key's lanes.
func (n Names) KeyLanes(key string) string { return n.prefix + ".jobs.key." + key + ".*" }

// KeyJobs is the filter of every key's lanes.
func (n Names) KeyJobs() string { return n.prefix + ".jobs.key.*.*" }

// ParseKeyJobSubject is KeyJobSubject's inverse.
func (n Names) ParseKeyJobSubject(subject string) (key string, prio int, ok bool) {
	rest, found := strings.CutPrefix(subject, n.prefix+".jobs.key.")
	if !found {
		return "", 0, false
	}
	key, p, found := strings.Cut(rest, ".")
	prio, err := strconv.Atoi(p)
	if !found || err != nil || !ValidConcurrencyKey(key) || prio < MinPriority || prio > MaxPriority || strconv.Itoa(prio) != p {
		return "", 0, false
	}
	return key, prio, true
}

// SlotsBucket is the KV bucket of the cluster's key slots: one entry
// "<key>.<n>" per running job of a concurrency key, n below the key's
// limit, so no more than the limit can exist at once whoever races for
// them. A slot names its run (KeySlot) and is deleted once the run has
// ended.
func (n Names) SlotsBucket() string { return n.upper + "_SLOTS" }

// SlotKey is the key of slot i of concurrency key key.
func SlotKey(key string, i int) string { return key + "." + strconv.Itoa(i) }

// ParseSlotKey is SlotKey's inverse.
func ParseSlotKey(k string) (key string, i int, ok bool) {
	key, n, found := strings.Cut(k, ".")
	i, err := strconv.Atoi(n)
	if !found || err != nil || i < 0 || !ValidConcurrencyKey(key) || strconv.Itoa(i) != n {
		return "", 0, false
	}
	return key, i, true
}

// KeySlot is the value of a slot: the run holding it (empty for the
// moment between the slot's claim and its job's), the worker that
// claimed it and when.
type KeySlot struct {
	RunID  string    `json:"runId,omitempty"`
	Worker string    `json:"worker"`
	At     time.Time `json:"at"`
}

// ReadQueueSubject answers with a QueueView: the jobs waiting in the keys'
// lanes, in the order they will start, and why each waits.
func (n Names) ReadQueueSubject() string { return n.prefix + ".read.queue" }

// QueueRequest is the body of a ReadQueueSubject request: every key, or
// only Key; at most Limit waiting jobs listed per key (0 is
// DefaultQueueJobs). An empty body is the zero QueueRequest.
type QueueRequest struct {
	Key   string `json:"key,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

const (
	// DefaultQueueJobs is how many waiting jobs of a key a QueueView lists
	// when the request leaves limit out.
	DefaultQueueJobs = 10
	// MaxQueueJobs bounds the jobs listed per key.
	MaxQueueJobs = 100
)

// Error codes of a refused queue request (Nats-Service-Error-Code, with
// the sentence in Nats-Service-Error), as the read relay's and the
// approvals' refusals.
const (
	QueueBad    = "400" // the body is not a QueueRequest (DecodeQueueRequest's error)
	QueueFailed = "500" // the lanes or the slots could not be read
)

// DecodeQueueRequest parses a queue request body strictly: empty, or one
// JSON object of QueueRequest's fields and nothing else, key a valid
// concurrency key when given, limit within 0 (DefaultQueueJobs) to
// MaxQueueJobs. The Limit it returns is never 0. Errors wrap ErrBadRead.
func DecodeQueueRequest(b []byte) (QueueRequest, error) {
	var r QueueRequest
	if b = bytes.TrimSpace(b); len(b) > 0 {
		if len(b) > maxReadBody {
			return QueueRequest{}, fmt.Errorf("%w: body of %d bytes, at most %d", ErrBadRead, len(b), maxReadBody)
		}
		if b[0] != '{' {
			return QueueRequest{}, fmt.Errorf("%w: not a JSON object", ErrBadRead)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			return QueueRequest{}, fmt.Errorf("%w: %w", ErrBadRead, err)
		}
		if _, err := d.Token(); !errors.Is(err, io.EOF) {
			return QueueRequest{}, fmt.Errorf("%w: data after the object", ErrBadRead)
		}
	}
	if r.Key != "" && !ValidConcurrencyKey(r.Key) {
		return QueueRequest{}, fmt.Errorf("%w: key %q must match [A-Za-z0-9_-]{1,64}", ErrBadRead, r.Key)
	}
	switch {
	case r.Limit < 0 || r.Limit > MaxQueueJobs:
		return QueueRequest{}, fmt.Errorf("%w: limit %d, want 1 to %d", ErrBadRead, r.Limit, MaxQueueJobs)
	case r.Limit == 0:
		r.Limit = DefaultQueueJobs
	}
	return r, nil
}

// WaitReason says why a queued job has not started.
type WaitReason string

// Wait reasons of a queued job.
const (
	// WaitKeyLimit: its key runs as many jobs as its limit allows.
	WaitKeyLimit WaitReason = "key_limit"
	// WaitBehind: jobs of its key are ahead of it.
	WaitBehind WaitReason = "behind"
	// WaitProfileLimit: every worker with a free slot runs its profile's
	// maxConcurrent.
	WaitProfileLimit WaitReason = "profile_limit"
	// WaitNoWorker: no worker has a free slot.
	WaitNoWorker WaitReason = "no_free_worker"
)

// QueuedJob is one waiting job of a key.
type QueuedJob struct {
	RunID    string `json:"runId"`
	Profile  string `json:"profile"`
	Priority int    `json:"priority"`
	// Position is 1 for the key's next job.
	Position int        `json:"position"`
	Since    time.Time  `json:"since"`
	Reason   WaitReason `json:"reason"`
}

// KeyQueue is one concurrency key's state across the cluster.
type KeyQueue struct {
	Key string `json:"key"`
	// Running counts the key's held slots; Limit is 0 when unlimited.
	Running int `json:"running"`
	Limit   int `json:"limit"`
	Weight  int `json:"weight"`
	// Waiting counts every waiting job of the key; Jobs lists the first
	// ones, in the order they will start.
	Waiting int         `json:"waiting"`
	Jobs    []QueuedJob `json:"jobs"`
}

// QueueView is the reply of ReadQueueSubject: every key with a job
// waiting or running, the keys with jobs waiting first.
type QueueView struct {
	Keys []KeyQueue `json:"keys"`
	// FreeSlots counts the free slots of the workers that answered, of
	// Workers in all.
	FreeSlots int `json:"freeSlots"`
	Workers   int `json:"workers"`
	// Unkeyed counts the waiting jobs of no key (and the keyed jobs not
	// yet moved to their lanes), taken in arrival order beside the keys.
	Unkeyed uint64 `json:"unkeyed"`
}

// String names the reason as a person reads it.
func (r WaitReason) String() string {
	switch r {
	case WaitKeyLimit:
		return "key at its limit"
	case WaitBehind:
		return "behind its key's earlier jobs"
	case WaitProfileLimit:
		return "profile at its limit on every free worker"
	case WaitNoWorker:
		return "no free worker"
	case WaitStarting:
		return "starting"
	}
	return fmt.Sprintf("waiting (%s)", string(r))
}

// WaitStarting: a worker with room is taking it.
const WaitStarting WaitReason = "starting"

// WorkersLoadSubject is where every worker answers with its WorkerLoad
// (no queue group): how the queue view learns the fleet's free slots.
func (n Names) WorkersLoadSubject() string { return n.prefix + ".workers.load" }

// WorkerLoad is one worker's answer on WorkersLoadSubject.
type WorkerLoad struct {
	Worker       string   `json:"worker"`
	Free         int      `json:"free"`
	FullProfiles []string `json:"fullProfiles,omitempty"`
}
