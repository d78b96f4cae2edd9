package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EventType is an AG-UI event's type, as the protocol spells it.
type EventType string

// The AG-UI event types a projection emits.
const (
	RunStarted              EventType = "RUN_STARTED"
	RunFinished             EventType = "RUN_FINISHED"
	RunError                EventType = "RUN_ERROR"
	TextMessageStart        EventType = "TEXT_MESSAGE_START"
	TextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          EventType = "TEXT_MESSAGE_END"
	ReasoningStart          EventType = "REASONING_START"
	ReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	ReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	ReasoningEnd            EventType = "REASONING_END"
	ToolCallStart           EventType = "TOOL_CALL_START"
	ToolCallArgs            EventType = "TOOL_CALL_ARGS"
	ToolCallEnd             EventType = "TOOL_CALL_END"
	ToolCallResult          EventType = "TOOL_CALL_RESULT"
	Raw                     EventType = "RAW"
	Custom                  EventType = "CUSTOM"
)

// Event is one AG-UI event. The field names are the protocol's (AG-UI
// 1.0, @ag-ui/core): a field an event type does not have stays empty
// and is left out of its JSON. Content is a pointer because a tool's
// result may be the empty string, which must still be sent.
type Event struct {
	Type            EventType       `json:"type"`
	ThreadID        string          `json:"threadId,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	Content         *string         `json:"content,omitempty"`
	Name            string          `json:"name,omitempty"`
	Value           json.RawMessage `json:"value,omitempty"`
	RawPayload      json.RawMessage `json:"event,omitempty"`
	Source          string          `json:"source,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	Outcome         *Outcome        `json:"outcome,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Usage           []TokenUsage    `json:"usage,omitempty"`
	// Timestamp is the chain message's stored time, in milliseconds
	// since the epoch (absent when the message had none).
	Timestamp int64           `json:"timestamp,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	RawEvent  json.RawMessage `json:"rawEvent,omitempty"`
}

// Outcome is a RUN_FINISHED's outcome; Interrupts only with
// OutcomeInterrupt (at least one).
type Outcome struct {
	Type       OutcomeType `json:"type"`
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is something an AG-UI run needs from outside before it can
// go on (@ag-ui/core's Interrupt): for baton, a permission prompt the
// run's policy asks a person about. The next AG-UI run answers it with a
// resume entry (RunAgentInput.resume) naming its ID.
type Interrupt struct {
	// ID is the approval's id (protocol.Approval's ID) within its run.
	ID string `json:"id"`
	// Reason is protocol.ReasonApproval.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// ToolCallID is the AG-UI tool call the prompt is about, while it
	// waits for its result.
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	// Metadata holds the approval's runId, tool, target and rule.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// OutcomeType says how a run that did not fail ended.
type OutcomeType string

// Outcomes of RUN_FINISHED. An interrupt obliges the client's next run
// to answer it (RunAgentInput.resume): baton ends a turn so only when
// the agent waits on a permission prompt its policy asks a person about.
const (
	OutcomeSuccess   OutcomeType = "success"
	OutcomeCancelled OutcomeType = "cancelled"
	OutcomeInterrupt OutcomeType = "interrupt"
)

// TokenUsage is AG-UI's token accounting for one provider and model:
// InputTokens and OutputTokens are totals, the cached, cache-write and
// reasoning counts parts of them.
type TokenUsage struct {
	Provider              string `json:"provider,omitempty"`
	Model                 string `json:"model,omitempty"`
	InputTokens           int64  `json:"inputTokens,omitempty"`
	OutputTokens          int64  `json:"outputTokens,omitempty"`
	TotalTokens           int64  `json:"totalTokens,omitempty"`
	ReasoningTokens       int64  `json:"reasoningTokens,omitempty"`
	CachedInputTokens     int64  `json:"cachedInputTokens,omitempty"`
	CacheWriteInputTokens int64  `json:"cacheWriteInputTokens,omitempty"`
}

// add sums u's counts into t.
func (t *TokenUsage) add(u TokenUsage) {
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.TotalTokens += u.TotalTokens
	t.ReasoningTokens += u.ReasoningTokens
	t.CachedInputTokens += u.CachedInputTokens
	t.CacheWriteInputTokens += u.CacheWriteInputTokens
}

// Position names one event of a projection: the stream sequence of the
// chain message it came from (the last piece's, for a chunked line) and
// its index among the events that message produced. Positions only grow
// along a projection, so one is a resume point: an SSE event's id.
type Position struct {
	Seq   uint64
	Index int
}

// ErrBadPosition is returned for a string that is no Position.
var ErrBadPosition = errors.New("bad position")

// String is "<seq>:<index>", e.g. "42:3".
func (p Position) String() string {
	return strconv.FormatUint(p.Seq, 10) + ":" + strconv.Itoa(p.Index)
}

// ParsePosition reads what Position.String wrote.
func ParsePosition(s string) (Position, error) {
	a, b, ok := strings.Cut(s, ":")
	seq, err1 := strconv.ParseUint(a, 10, 64)
	idx, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || idx < 0 || a[0] == '+' || b[0] == '+' {
		return Position{}, fmt.Errorf("%w: %q (want <seq>:<index>)", ErrBadPosition, s)
	}
	return Position{Seq: seq, Index: idx}, nil
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Seq < q.Seq || p.Seq == q.Seq && p.Index < q.Index
}
