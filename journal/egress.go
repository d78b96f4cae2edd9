package journal

import (
	"encoding/json"
	"time"
)

// Egress is one connection the sandbox's egress proxy decided: allowed
// and carried to its end, or refused. It is what the chain's egress
// message holds (docs/protocol.md), as JSON.
type Egress struct {
	Start  time.Time `json:"start,omitzero"` // when the agent's request came
	Host   string    `json:"host,omitempty"` // as the agent named it (a name or an address)
	Port   uint16    `json:"port,omitempty"`
	Method string    `json:"method,omitempty"` // CONNECT for a tunnel, else the forwarded request's
	// Allowed: the policy let the connection through. Reason says why it
	// was refused, or why an allowed one failed (the host did not answer).
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// Secret names the secret the proxy swapped into the request, if any.
	Secret string `json:"secret"`
	// Bytes the agent sent and received through the proxy, and how long
	// the connection lasted.
	BytesOut   int64 `json:"bytesOut"`
	BytesIn    int64 `json:"bytesIn"`
	DurationMs int64 `json:"durationMs"`
	// Note is set on the run's last record instead of a connection: the
	// runner records no more of the run's egress (EgressNoteLimit).
	Note string `json:"note,omitempty"`
}

// EgressNoteLimit is the note of the record after which a run's further
// egress is not recorded.
const EgressNoteLimit = "further egress not recorded"

// EgressRecord is the journal line runner-outer writes when its egress
// proxy has decided a connection: between the agent's lines, so the
// chain holds the agent's traffic in order with what it printed. Like an
// input record it carries the run's nonce, which the agent never sees,
// so the agent cannot forge one.
type EgressRecord struct {
	Egress Egress `json:"__egress"`
	Nonce  string `json:"__nonce"`
}

// egressPrefix starts every egress record's line (json.Marshal keeps
// field order).
var egressPrefix = []byte(`{"__egress":{`)

// Bounds of an egress record's strings, which the agent's request chose:
// the record stays a short line whatever it asked for.
const (
	maxEgressHost   = 255 // a DNS name is at most 253 bytes
	maxEgressReason = 512
)

// Line encodes r as one journal line, newline included, its host and
// reason cut to their bounds.
func (r EgressRecord) Line() []byte {
	r.Egress.Host = clip(r.Egress.Host, maxEgressHost)
	r.Egress.Reason = clip(r.Egress.Reason, maxEgressReason)
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain fields always encode
	}
	return append(b, '\n')
}

// Body is the egress message's payload: r.Egress as JSON.
func (r EgressRecord) Body() []byte {
	b, err := json.Marshal(r.Egress)
	if err != nil {
		panic(err) // plain fields always encode
	}
	return b
}

// ParseEgressRecord reports whether line (a journal line without its
// '\n') is an egress record of the run whose nonce is nonce, and decodes
// it. It fails closed like ParseInputRecord; a record must name a host,
// or be the limit's note.
func ParseEgressRecord(line []byte, nonce string) (EgressRecord, bool) {
	var r EgressRecord
	if !decodeRecord(line, egressPrefix, nonce, &r, &r.Nonce) {
		return EgressRecord{}, false
	}
	if e := r.Egress; (e.Host == "") == (e.Note == "") || e.BytesOut < 0 || e.BytesIn < 0 || e.DurationMs < 0 {
		return EgressRecord{}, false
	}
	return r, true
}
