package protocol

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/batonhq/baton/internal/runid"
)

// Requests about sessions go to a worker (one queue group answers each),
// which checks them and changes the session's record: clients never write
// the sessions bucket. A refusal is a reply with the micro service's
// headers (Nats-Service-Error-Code and Nats-Service-Error), codes as
// below.

// SessionSendSubject asks to send a message to session's agent: its live
// run gets it as input (as InputSubject does), and a session with no live
// run (paused, or idle) starts its next run with the message as the
// job's input. A retried request with the same Nats-Msg-Id starts no
// second run (see SessionSendReply).
func (n Names) SessionSendSubject(session string) string {
	return n.prefix + ".control.session.send." + session
}

// SessionForkSubject asks to fork session: a new session from one of its
// checkpoints (the body is a SessionForkRequest), without copying it.
func (n Names) SessionForkSubject(session string) string {
	return n.prefix + ".control.session.fork." + session
}

// SessionDeleteSubject asks to delete session and the checkpoints only it
// uses; a session with a live run is refused (SessionLive).
func (n Names) SessionDeleteSubject(session string) string {
	return n.prefix + ".control.session.delete." + session
}

// SessionRequests is the subject workers answer session requests of op
// ("send", "fork", "delete") on.
func (n Names) SessionRequests(op string) string { return n.prefix + ".control.session." + op + ".*" }

// ParseSessionSubject returns the session ending subject, a request of op.
func (n Names) ParseSessionSubject(op, subject string) (string, bool) {
	p := n.prefix + ".control.session." + op + "."
	if len(subject) <= len(p) || subject[:len(p)] != p || !ValidSessionID(subject[len(p):]) {
		return "", false
	}
	return subject[len(p):], true
}

// ReadSessionSubject asks the read relay for session's record (msgpack,
// kv.SessionRecord).
func (n Names) ReadSessionSubject(session string) string {
	return n.prefix + ".read.session." + session
}

// ReadSessionsSubject asks for a page of the sessions bucket's messages.
func (n Names) ReadSessionsSubject() string { return n.prefix + ".read.sessions" }

// Error codes of a refused session request.
const (
	SessionBad      = "400" // a bad session id or body
	SessionNotFound = "404" // no such session, or checkpoint of it
	SessionExists   = "409" // fork: the new session's id is taken
	SessionLive     = "423" // delete: the session has a live run
	SessionFailed   = "503" // the records or the stream could not be read or written; try again
)

// SessionSendReply answers a send: the run that got the message, and
// whether the send started it (a paused or idle session).
type SessionSendReply struct {
	Session string `json:"session"`
	RunID   string `json:"runId"`
	Started bool   `json:"started"`
	// Seq is the input's sequence in the input stream, for a message a
	// live run got.
	Seq uint64 `json:"seq,omitempty"`
}

// SessionForkRequest is the body of a fork request: the new session's id,
// the checkpoint to start from (its number in the session; omitted: the
// head) and labels to add to those it inherits.
type SessionForkRequest struct {
	As         string            `json:"as"`
	Checkpoint *int              `json:"checkpoint,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ErrBadSessionRequest is wrapped by DecodeSessionForkRequest's errors.
var ErrBadSessionRequest = errors.New("protocol: bad session request")

// maxSessionBody bounds a fork request body.
const maxSessionBody = 16 << 10

// DecodeSessionForkRequest parses a fork request strictly: one JSON
// object of SessionForkRequest's fields, a valid new id, a checkpoint not
// negative, labels within a job's bounds.
func DecodeSessionForkRequest(b []byte) (SessionForkRequest, error) {
	var r SessionForkRequest
	if len(b) > maxSessionBody {
		return r, fmt.Errorf("%w: body of %d bytes, at most %d", ErrBadSessionRequest, len(b), maxSessionBody)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return SessionForkRequest{}, fmt.Errorf("%w: %w", ErrBadSessionRequest, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return SessionForkRequest{}, fmt.Errorf("%w: data after the object", ErrBadSessionRequest)
	}
	switch {
	case !ValidSessionID(r.As):
		return SessionForkRequest{}, fmt.Errorf("%w: the new session's id %q must match [A-Za-z0-9_-]{1,128}", ErrBadSessionRequest, r.As)
	case r.Checkpoint != nil && *r.Checkpoint < 0:
		return SessionForkRequest{}, fmt.Errorf("%w: checkpoint %d is negative", ErrBadSessionRequest, *r.Checkpoint)
	case len(r.Labels) > DefaultMaxLabels:
		return SessionForkRequest{}, fmt.Errorf("%w: %d labels, at most %d", ErrBadSessionRequest, len(r.Labels), DefaultMaxLabels)
	}
	for k, v := range r.Labels {
		if strings.HasPrefix(strings.ToLower(k), ReservedLabelPrefix) {
			return SessionForkRequest{}, fmt.Errorf("%w: label %q: the prefix %q is reserved for baton", ErrBadSessionRequest, k, ReservedLabelPrefix)
		}
		if k == "" || len(k) > MaxLabelKeyBytes || len(v) > MaxLabelValueBytes || !utf8.ValidString(k+v) {
			return SessionForkRequest{}, fmt.Errorf("%w: label %q: keys of 1 to %d bytes, values of at most %d, UTF-8", ErrBadSessionRequest, k, MaxLabelKeyBytes, MaxLabelValueBytes)
		}
	}
	return r, nil
}

// SessionRunID names the run a send to session starts: from the send's
// message id (a retry names the same run, which starts once), else at
// random. The console's AG-UI endpoint names a thread's first run so too.
func SessionRunID(session, msgID string) string {
	var tail string
	if msgID != "" {
		sum := sha256.Sum256([]byte(session + "\x00" + msgID))
		tail = hex.EncodeToString(sum[:8])
	} else {
		tail = hex.EncodeToString([]byte(rand.Text())[:8])
	}
	return session[:min(len(session), runid.MaxLen-len(tail)-1)] + "-" + tail
}
