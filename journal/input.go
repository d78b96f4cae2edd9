package journal

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
)

// InputRecord is the journal line runner-outer writes where it wrote an
// input message to the agent's stdin: between the agent's lines, so the
// journal, and the chain published from it, hold the conversation in the
// order it happened. Like the sentinel it carries the run's nonce, which
// the agent never sees, so the agent cannot forge one.
type InputRecord struct {
	Seq   uint64 `json:"__input"` // the message's input stream sequence
	Nonce string `json:"__nonce"`
	EOF   bool   `json:"eof,omitempty"` // stdin was closed after it
	// Interrupt: an interrupt, by the line in Data or (no Data) SIGINT.
	Interrupt bool   `json:"interrupt,omitempty"`
	Data      []byte `json:"data"` // what was written, newline included
	// Headers are chain headers the input came with (chain.InputMessage).
	Headers map[string]string `json:"headers,omitempty"`
}

// inputPrefix starts every input record's line (json.Marshal keeps field
// order).
var inputPrefix = []byte(`{"__input":`)

// Line encodes r as one journal line, newline included.
func (r InputRecord) Line() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // ints, strings and bytes always encode
	}
	return append(b, '\n')
}

// ParseInputRecord reports whether line (a journal line without its '\n')
// is an input record of the run whose nonce is nonce, and decodes it. It
// fails closed: exactly the record's fields, each well typed, and the
// run's nonce; any other line is an ordinary line.
func ParseInputRecord(line []byte, nonce string) (InputRecord, bool) {
	var r InputRecord
	if !decodeRecord(line, inputPrefix, nonce, &r, &r.Nonce) || r.Seq == 0 {
		return InputRecord{}, false
	}
	return r, true
}

// decodeRecord decodes line into v, a runner's record whose lines start
// with prefix and whose nonce field is *got, if it is one of the run
// whose nonce is nonce: exactly the record's fields, each well typed,
// nothing after it, and that nonce. A line that is not is the agent's.
func decodeRecord(line, prefix []byte, nonce string, v any, got *string) bool {
	// Most lines are told apart with one comparison.
	if !bytes.HasPrefix(line, prefix) || !validNonce(nonce) || !bytes.Contains(line, []byte(nonce)) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(*got), []byte(nonce)) == 1
}
