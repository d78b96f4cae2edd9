package journal

import (
	"encoding/json"
)

// Sentinel reasons: why the agent ended.
const (
	ReasonExit    = "exit"    // the agent exited by itself
	ReasonSignal  = "signal"  // a signal killed it
	ReasonTimeout = "timeout" // the runner ended it at the deadline
	ReasonCancel  = "cancel"  // the runner ended it on a cancel request
	ReasonError   = "error"   // the sandbox failed to start or run it
)

// Sentinel is the journal's last line. Its nonce is random per run and never
// shown to the agent, so a line the agent forges is an ordinary line.
type Sentinel struct {
	Exit   int    `json:"__exit"`
	Nonce  string `json:"__nonce"`
	Reason string `json:"reason"`
	Signal string `json:"signal,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Line encodes s as one journal line, newline included.
func (s Sentinel) Line() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain strings and ints always encode
	}
	return append(b, '\n')
}
