package protocol

import "errors"

// Reason is the machine-readable code of a job rejection; it is the last
// token of the DLQ subject and the value of HeaderReason.
type Reason string

const (
	ReasonMalformed      Reason = "malformed"       // not decodable JSON/msgpack, or wrong types
	ReasonUnknownField   Reason = "unknown_field"   // a field the job format does not have
	ReasonBadRunID       Reason = "bad_run_id"      // missing or not [A-Za-z0-9_-]{1,128}
	ReasonOversize       Reason = "oversize"        // payload, input or files over the limits
	ReasonUnknownProfile Reason = "unknown_profile" // no such profile on this worker
	ReasonNotAllowed     Reason = "not_allowed"     // args or env the profile does not allow
	ReasonInvalid        Reason = "invalid"         // any other bad value (timeout, file path, ...)
)

var (
	ErrInvalidName = errors.New("protocol: invalid name")

	// Job rejections; each maps to a Reason with ReasonOf.
	ErrMalformedJob   = errors.New("malformed job")
	ErrUnknownField   = errors.New("unknown job field")
	ErrBadRunID       = errors.New("bad runId")
	ErrOversize       = errors.New("job too large")
	ErrUnknownProfile = errors.New("unknown profile")
	ErrNotAllowed     = errors.New("not allowed by profile")
	ErrInvalidJob     = errors.New("invalid job")
)

// ReasonOf maps a rejection error to its DLQ reason code.
func ReasonOf(err error) Reason {
	switch {
	case errors.Is(err, ErrUnknownField):
		return ReasonUnknownField
	case errors.Is(err, ErrBadRunID):
		return ReasonBadRunID
	case errors.Is(err, ErrOversize):
		return ReasonOversize
	case errors.Is(err, ErrUnknownProfile):
		return ReasonUnknownProfile
	case errors.Is(err, ErrNotAllowed):
		return ReasonNotAllowed
	case errors.Is(err, ErrMalformedJob):
		return ReasonMalformed
	case errors.Is(err, ErrDuplicateRun):
		return ReasonDuplicate
	}
	return ReasonInvalid
}

// ReasonDuplicate marks a job whose runId already names a run: it starts
// nothing (I3), and is kept in the DLQ so its sender can see why.
const ReasonDuplicate Reason = "duplicate"

// ErrDuplicateRun is the rejection of a job whose runId is already taken.
var ErrDuplicateRun = errors.New("duplicate runId")
