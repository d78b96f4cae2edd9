package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The read relay: clients and run tokens read through the workers, never
// through the JetStream API themselves (no consumer create, no direct get),
// so no body a client writes reaches that API. A request goes to one of the
// subjects below with the requester's own inbox as its reply subject; a
// worker checks the reply (ReplyAllowed) and asks the server for a direct
// get whose answer goes to that inbox: the stored messages, each with its
// headers plus Nats-Stream, Nats-Subject, Nats-Sequence, Nats-Time-Stamp and
// Nats-Num-Pending, then a status message "204 EOB" (or "404" when nothing
// matched). A request the worker refuses gets one error message with the
// micro service headers (Nats-Service-Error-Code 400); one with a reply
// outside the requester's inbox gets nothing at all.

// ErrBadRead means a read relay request body is not one ReadRequest.
var ErrBadRead = errors.New("protocol: bad read request")

const (
	// DefaultReadMax is the page size when a request leaves max out.
	DefaultReadMax = 256
	// MaxReadMax bounds the messages of one page.
	MaxReadMax = 1024
	// ReadMaxBytes bounds the bytes of one page (the server stops the page
	// once past it; the EOB's Nats-Num-Pending says more are stored).
	ReadMaxBytes = 4 << 20
	// maxReadBody bounds a request body: a page request is a few dozen bytes.
	maxReadBody = 4096
	// maxReadName bounds an object name in a request; the worker checks it
	// names one of the run's objects.
	maxReadName = 1024
)

// ReadRequest is the body of a page request (events, runs, dlq, chunks):
// from a stream sequence (0 is the start), at most max messages, and for
// chunks the output object's name. The filter is never in the body: the
// worker builds it from the subject's run id.
type ReadRequest struct {
	From uint64 `json:"from,omitempty"`
	Max  int    `json:"max,omitempty"`
	Name string `json:"name,omitempty"`
}

// DecodeReadRequest parses a relay request body strictly: empty, or one JSON
// object of ReadRequest's fields and nothing else, max within 0 (the
// default) to MaxReadMax. Errors wrap ErrBadRead.
func DecodeReadRequest(b []byte) (ReadRequest, error) {
	var r ReadRequest
	if len(bytes.TrimSpace(b)) == 0 {
		r.Max = DefaultReadMax
		return r, nil
	}
	if len(b) > maxReadBody {
		return ReadRequest{}, fmt.Errorf("%w: body of %d bytes, at most %d", ErrBadRead, len(b), maxReadBody)
	}
	if b = bytes.TrimSpace(b); b[0] != '{' {
		return ReadRequest{}, fmt.Errorf("%w: not a JSON object", ErrBadRead)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return ReadRequest{}, fmt.Errorf("%w: %w", ErrBadRead, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return ReadRequest{}, fmt.Errorf("%w: data after the object", ErrBadRead)
	}
	switch {
	case r.Max < 0 || r.Max > MaxReadMax:
		return ReadRequest{}, fmt.Errorf("%w: max %d, want 1 to %d", ErrBadRead, r.Max, MaxReadMax)
	case r.Max == 0:
		r.Max = DefaultReadMax
	}
	if len(r.Name) > maxReadName {
		return ReadRequest{}, fmt.Errorf("%w: name of %d bytes, at most %d", ErrBadRead, len(r.Name), maxReadName)
	}
	return r, nil
}

// Read relay subjects. Each ends with the run id it reads (or nothing, for
// the lists a run token may not read).

// ReadEventsSubject asks for a page of runID's chain: its messages from a
// sequence on, in stream order.
func (n Names) ReadEventsSubject(runID string) string { return n.prefix + ".read.events." + runID }

// ReadStatusSubject asks for the last status message of runID.
func (n Names) ReadStatusSubject(runID string) string { return n.prefix + ".read.status." + runID }

// ReadRunSubject asks for runID's record: the bucket's message (msgpack,
// with KV-Operation when deleted).
func (n Names) ReadRunSubject(runID string) string { return n.prefix + ".read.run." + runID }

// ReadRunsSubject asks for a page of the run records bucket's messages.
func (n Names) ReadRunsSubject() string { return n.prefix + ".read.runs" }

// ReadDLQSubject asks for a page of the dead-letter stream.
func (n Names) ReadDLQSubject() string { return n.prefix + ".read.dlq" }

// ReadObjectSubject asks for the info of runID's output object (its name,
// "<runId>/…", in the body).
func (n Names) ReadObjectSubject(runID string) string { return n.prefix + ".read.object." + runID }

// ReadChunksSubject asks for a page of the chunks of runID's output object.
func (n Names) ReadChunksSubject(runID string) string { return n.prefix + ".read.chunks." + runID }

// ReadRequests is the subject of the relay's endpoint kind ("events",
// "status", "run", "object", "chunks": one run id token follows).
func (n Names) ReadRequests(kind string) string { return n.prefix + ".read." + kind + ".*" }

// ReadSubjects is every relay subject, for a client's permissions.
func (n Names) ReadSubjects() string { return n.prefix + ".read.>" }

// ParseReadSubject returns the run id ending subject, a request of kind.
func (n Names) ParseReadSubject(kind, subject string) (runID string, ok bool) {
	p := n.prefix + ".read." + kind + "."
	if len(subject) <= len(p) || subject[:len(p)] != p || !ValidRunID(subject[len(p):]) {
		return "", false
	}
	return subject[len(p):], true
}
