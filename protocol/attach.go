package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Attach reasons.
const (
	AttachHandoff = "handoff" // the holder stopped gracefully and released the lease
	AttachRecover = "recover" // the holder's lease expired (crash, lost connection)
)

// AttachJob asks the workers of one node to take over a run whose runner
// lives there. Workers publish it on AttachJobSubject(node); it is internal,
// but decoded as strictly as any job because anyone may publish there.
type AttachJob struct {
	RunID  string `json:"runId"`
	Reason string `json:"reason"`
}

// Encode returns the job's JSON.
func (a AttachJob) Encode() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err) // two strings always encode
	}
	return b
}

// DecodeAttachJob decodes and checks an attach job.
func DecodeAttachJob(data []byte) (AttachJob, error) {
	if len(data) > 4096 {
		return AttachJob{}, fmt.Errorf("%w: attach job of %d bytes (at most 4096)", ErrOversize, len(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var a AttachJob
	if err := dec.Decode(&a); err != nil {
		return AttachJob{}, fmt.Errorf("%w: attach job: %v", ErrMalformedJob, err)
	}
	if dec.More() {
		return AttachJob{}, fmt.Errorf("%w: attach job: data after the object", ErrMalformedJob)
	}
	if !ValidRunID(a.RunID) {
		return AttachJob{}, fmt.Errorf("%w: runId %q must match [A-Za-z0-9_-]{1,128}", ErrBadRunID, cut(a.RunID))
	}
	switch a.Reason {
	case AttachHandoff, AttachRecover:
	default:
		return AttachJob{}, fmt.Errorf("%w: attach reason %q must be %q or %q", ErrInvalidJob, cut(a.Reason), AttachHandoff, AttachRecover)
	}
	return a, nil
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
