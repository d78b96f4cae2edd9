package journal

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"

	"github.com/batonhq/baton/internal/runid"
)

// Phases of a tool record.
const (
	ToolCall   = "call"   // the agent called the tool: Args
	ToolResult = "result" // its answer: Result, or Error
)

// MaxToolName bounds a tool's name: one NATS subject token.
const MaxToolName = 64

// ToolRecord is the journal line runner-outer writes when the agent calls
// a host tool (phase "call") and when the call's answer comes back (phase
// "result"), between the agent's lines. Like the sentinel it carries the
// run's nonce, which the agent never sees: the agent cannot forge a call
// or an answer. Call numbers a run's calls from 1: with the run id it is
// the call's idempotency key, so a worker that re-attaches and finds a
// call without its result asks again under the same key.
type ToolRecord struct {
	Call   uint64 `json:"__tool"`
	Nonce  string `json:"__nonce"`
	Phase  string `json:"phase"`
	Name   string `json:"name"`
	Args   []byte `json:"args,omitempty"`   // phase call: the call's arguments (JSON)
	Result []byte `json:"result,omitempty"` // phase result: the tool's answer
	Error  string `json:"error,omitempty"`  // phase result: why there is no answer
}

// toolPrefix starts every tool record's line (json.Marshal keeps field
// order).
var toolPrefix = []byte(`{"__tool":`)

// ValidToolName reports whether name can name a tool: one subject token
// of [A-Za-z0-9_-], at most MaxToolName bytes.
func ValidToolName(name string) bool { return runid.Chars(name, MaxToolName, "_-") }

// Line encodes r as one journal line, newline included.
func (r ToolRecord) Line() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // ints, strings and bytes always encode
	}
	return append(b, '\n')
}

// ParseToolRecord reports whether line (a journal line without its '\n')
// is a tool record of the run whose nonce is nonce, and decodes it. It
// fails closed, as ParseInputRecord does: exactly the record's fields,
// each well typed, a known phase with only its own fields, a valid name
// and the run's nonce; any other line is an ordinary line.
func ParseToolRecord(line []byte, nonce string) (ToolRecord, bool) {
	if !bytes.HasPrefix(line, toolPrefix) || !validNonce(nonce) || !bytes.Contains(line, []byte(nonce)) {
		return ToolRecord{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r ToolRecord
	if err := dec.Decode(&r); err != nil || dec.More() {
		return ToolRecord{}, false
	}
	if subtle.ConstantTimeCompare([]byte(r.Nonce), []byte(nonce)) != 1 || r.Call == 0 || !ValidToolName(r.Name) {
		return ToolRecord{}, false
	}
	switch {
	case r.Phase == ToolCall && r.Result == nil && r.Error == "":
	case r.Phase == ToolResult && r.Args == nil:
	default:
		return ToolRecord{}, false
	}
	return r, true
}
