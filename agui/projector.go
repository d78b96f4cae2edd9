package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/protocol"
)

// Message is one message of a run's chain, as stored: a relay page's
// message, a live one, or a consumer's, in chain order.
type Message struct {
	// Kind is the subject's last token: events, raw, status or input.
	Kind protocol.RunKind
	// Seq is the message's stream sequence (Nats-Sequence), from 1.
	Seq uint64
	// Header holds the message's headers (a nats.Header converts):
	// Baton-Chunk, and on inputs Baton-Input-Seq, Baton-Input-EOF and
	// Baton-Input-Kind.
	Header map[string][]string
	Data   []byte
	// Time is the stored time (Nats-Time-Stamp); zero leaves the events'
	// timestamps out.
	Time time.Time
}

// Projected is an event and its position.
type Projected struct {
	Pos   Position
	Event Event
}

// DefaultMaxLine bounds the line a projector reassembles from chunks.
const DefaultMaxLine = 64 << 20

// Option configures a Projector.
type Option func(*Projector)

// WithDialect names the agent's dialect (a profile's `events`); without
// it, or with "", the projector sniffs it from the chain's lines.
func WithDialect(d Dialect) Option { return func(p *Projector) { p.dialect = d } }

// WithThreadID sets the AG-UI threadId (a run's session); the default is
// the runId.
func WithThreadID(id string) Option { return func(p *Projector) { p.threadID = id } }

// WithJobInput echoes the job's input, which the chain does not carry,
// as the first user turn, right after the first RUN_STARTED (the run
// record's input).
func WithJobInput(input []byte) Option { return func(p *Projector) { p.jobInput = input } }

// After makes the projector return only the events after pos: a resume.
// It still reads every message, so feed it the chain from the start, or
// from where the State it was restored from stopped.
func After(pos Position) Option { return func(p *Projector) { p.after = pos } }

// WithMaxLine bounds the line reassembled from chunks (DefaultMaxLine); a
// longer one is dropped with a CUSTOM baton.error.
func WithMaxLine(n int) Option { return func(p *Projector) { p.maxLine = n } }

// Projector turns a run's chain into AG-UI events, one message at a
// time, deterministically: the same messages give the same events, ids
// and positions. It is not safe for concurrent use.
type Projector struct {
	runID, threadID string
	dialect         Dialect
	jobInput        []byte
	after           Position
	maxLine         int
	st              state

	// The message being projected.
	pos  Position
	time int64
	hdr  map[string][]string
	out  []Projected
}

// state is all a projector carries from one message to the next; State
// and Restore move it.
type state struct {
	V     int    `json:"v"`
	RunID string `json:"runId"`
	// LastSeq is the last message read: one at or before it is skipped.
	LastSeq uint64 `json:"lastSeq,omitempty"`
	// Dialect is the sniffed dialect.
	Dialect Dialect `json:"dialect,omitempty"`
	// Runs counts the AG-UI runs opened; Run is the open one's id.
	Runs int    `json:"runs,omitempty"`
	Run  string `json:"run,omitempty"`
	// Open are the text, reasoning and tool-argument streams not yet
	// ended, in the order they started; Pending the tool calls ended
	// that have no result yet.
	Open    []entity `json:"open,omitempty"`
	Pending []entity `json:"pending,omitempty"`
	// Msg is the id of the agent's assistant message being told (Claude),
	// Streamed whether it comes as stream_event deltas, and Parent the
	// AG-UI id of the assistant's latest text since it last had a tool's
	// result: the parentMessageId of its tool calls, which AG-UI clients
	// file under that message.
	Msg      string `json:"msg,omitempty"`
	Streamed bool   `json:"streamed,omitempty"`
	Parent   string `json:"parent,omitempty"`
	// Turn is what the agent said of the turn's end, for the run's end.
	Turn *turn `json:"turn,omitempty"`
	// Interrupted: an interrupt was written during the open run.
	Interrupted bool `json:"interrupted,omitempty"`
	// Asks are the permission prompts the run's policy asked a person
	// about that nobody answered yet, oldest first: a turn that ends
	// while one is open ends with the interrupt outcome.
	Asks []ask `json:"asks,omitempty"`
	// AskWait is a waiting status (reason approval) that came before the
	// prompt it waits on: the prompt's line ends the turn with it.
	AskWait json.RawMessage `json:"askWait,omitempty"`
	// Chunk is a chunked line whose pieces are still coming.
	Chunk *chunk `json:"chunk,omitempty"`
}

const stateVersion = 1

type kind string

const (
	kindText      kind = "text"
	kindReasoning kind = "reasoning"
	kindTool      kind = "tool"
)

// entity is an open stream or a pending tool call.
type entity struct {
	// Key is the agent's handle: "block:<index>" for a Claude content
	// block, "item:<id>" for a Codex item, the tool's id when pending.
	Key  string `json:"key"`
	Kind kind   `json:"kind"`
	ID   string `json:"id"`
	// Tool is a tool call's id in the agent's own terms.
	Tool string `json:"tool,omitempty"`
	// Sent is how many bytes of a Codex item's text were sent, Sum their
	// FNV-1a hash: an item told whole again (updated, completed) sends
	// only what it adds to them, and nothing if it changed them.
	Sent int    `json:"sent,omitempty"`
	Sum  uint64 `json:"sum,omitempty"`
}

// Bounds of what a projector keeps, so that no chain makes it slow or
// big (an agent's output is not to be trusted): past them the oldest
// open stream is ended, and the oldest tool call waiting gets a result
// saying it got none.
const (
	maxOpen    = 256
	maxPending = 256
)

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

// fnvAdd extends the FNV-1a hash h with s.
func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// ask is a permission prompt waiting for a person's answer.
type ask struct {
	// ID is the approval's id (Baton-Approval).
	ID     string `json:"id"`
	Tool   string `json:"tool,omitempty"`
	Target string `json:"target,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// Call is the AG-UI id of the tool call it is about, if known.
	Call string `json:"call,omitempty"`
}

// turn is the agent's account of a turn: its turn-end line, an error,
// whether it was cancelled, its token usage.
type turn struct {
	Line      json.RawMessage `json:"line,omitempty"`
	Error     string          `json:"error,omitempty"`
	Code      string          `json:"code,omitempty"`
	Cancelled bool            `json:"cancelled,omitempty"`
	Usage     []TokenUsage    `json:"usage,omitempty"`
}

type chunk struct {
	Kind  protocol.RunKind `json:"kind"`
	N     int              `json:"n"`
	Next  int              `json:"next"`
	First uint64           `json:"first"`
	Buf   []byte           `json:"buf,omitempty"`
	// Over: the line outgrew the bound; its pieces are counted, not kept.
	Over bool `json:"over,omitempty"`
}

// ErrBadState is returned by Restore for bytes that are no state of this
// run's projector.
var ErrBadState = errors.New("bad projector state")

// New returns a projector for runID's chain.
func New(runID string, opts ...Option) *Projector {
	p := &Projector{runID: runID, threadID: runID, maxLine: DefaultMaxLine, st: state{V: stateVersion, RunID: runID}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// State is the projector's state after the last message it read, to
// carry instead of reading the chain again: Restore on a projector made
// with the same options continues from the next message.
func (p *Projector) State() []byte {
	b, err := json.Marshal(p.st)
	if err != nil {
		panic(err) // plain fields always encode
	}
	return b
}

// Restore replaces p's state with one State returned.
func (p *Projector) Restore(b []byte) error {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%w: %w", ErrBadState, err)
	}
	if st.V != stateVersion || st.RunID != p.runID {
		return fmt.Errorf("%w: version %d of run %q, want version %d of run %q", ErrBadState, st.V, st.RunID, stateVersion, p.runID)
	}
	p.st = st
	return nil
}

// Project reads the chain's next message and returns its events (none
// for a piece of a chunked line but the last). A message at or before
// the last one read is skipped, so overlapping pages are harmless.
func (p *Projector) Project(m Message) []Projected {
	if m.Seq == 0 || m.Seq <= p.st.LastSeq {
		return nil
	}
	p.st.LastSeq = m.Seq
	p.pos, p.out, p.time, p.hdr = Position{Seq: m.Seq}, nil, 0, m.Header
	if !m.Time.IsZero() {
		p.time = m.Time.UnixMilli()
	}
	data, whole := p.assemble(m)
	if !whole {
		return p.out
	}
	switch m.Kind {
	case protocol.KindStatus:
		p.status(data)
	case protocol.KindInput:
		p.input(m, data)
	case protocol.KindEvents:
		p.line(data)
	case protocol.KindRaw:
		p.custom("baton.raw", map[string]string{"line": string(data)})
	case protocol.KindEgress:
		p.egress(m, data)
	case protocol.KindTool:
		// The host tool call or answer as the runner saw it: the agent's
		// own lines show the call too, in its dialect (a Claude tool_use),
		// so this is CUSTOM, not a second TOOL_CALL.
		if json.Valid(data) {
			p.custom("baton.tool", json.RawMessage(data))
		} else {
			p.custom("baton.raw", map[string]string{"line": string(data)})
		}
	}
	return p.out
}

// egress emits a connection the run's egress proxy decided as CUSTOM
// baton.egress, its value the message's JSON object as it came.
func (p *Projector) egress(m Message, data []byte) {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && json.Valid(data) {
		p.custom("baton.egress", compact(data))
		return
	}
	p.fault("seq %d: an egress message that is not a JSON object", m.Seq)
}

func header(m Message, key string) string {
	if v := m.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// header is the first value of key among the headers of the message
// being projected.
func (p *Projector) header(key string) string {
	if v := p.hdr[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// assemble joins the pieces of a chunked line; whole is false while
// pieces are missing. A broken sequence is reported and dropped.
func (p *Projector) assemble(m Message) (data []byte, whole bool) {
	h := header(m, protocol.HeaderChunk)
	if c := p.st.Chunk; c != nil && (h == "" || m.Kind != c.Kind) {
		p.st.Chunk = nil
		p.fault("the line started at seq %d lacks pieces %d..%d of %d", c.First, c.Next, c.N, c.N)
	}
	if h == "" {
		return m.Data, true
	}
	i, n, ok := parseChunk(h)
	if !ok {
		p.fault("seq %d has a bad %s header %q", m.Seq, protocol.HeaderChunk, h)
		return nil, false
	}
	c := p.st.Chunk
	if c == nil {
		if i != 1 {
			p.fault("seq %d is piece %d/%d of a line whose first piece is missing", m.Seq, i, n)
			return nil, false
		}
		if n == 1 {
			return m.Data, true
		}
		c = &chunk{Kind: m.Kind, N: n, Next: 1, First: m.Seq}
		p.st.Chunk = c
	}
	if i != c.Next || n != c.N {
		p.st.Chunk = nil
		p.fault("the line started at seq %d expected piece %d/%d, seq %d is %d/%d", c.First, c.Next, c.N, m.Seq, i, n)
		return nil, false
	}
	c.Next++
	if !c.Over && len(c.Buf)+len(m.Data) > p.maxLine {
		c.Over, c.Buf = true, nil
	}
	if !c.Over {
		c.Buf = append(c.Buf, m.Data...)
	}
	if i < n {
		return nil, false
	}
	p.st.Chunk = nil
	if c.Over {
		p.fault("the line started at seq %d is larger than %d bytes: dropped", c.First, p.maxLine)
		return nil, false
	}
	return c.Buf, true
}

// parseChunk reads a Baton-Chunk header "i/n", 1 <= i <= n.
func parseChunk(h string) (i, n int, ok bool) {
	a, b, found := strings.Cut(h, "/")
	if !found || a == "" || b == "" || a[0] == '+' || b[0] == '+' {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	return i, n, err1 == nil && err2 == nil && i >= 1 && i <= n
}

// fault reports a chain that cannot be read as baton writes it.
func (p *Projector) fault(format string, args ...any) {
	p.custom("baton.error", map[string]string{"message": fmt.Sprintf(format, args...)})
}

// emit appends ev at the next position, opening a run first if none is
// open: every event but RUN_STARTED belongs to one.
func (p *Projector) emit(ev Event) {
	if ev.Type != RunStarted && p.st.Run == "" {
		p.openRun(nil)
	}
	ev.Timestamp = p.time
	if p.after.Less(p.pos) {
		p.out = append(p.out, Projected{Pos: p.pos, Event: ev})
	}
	p.pos.Index++
}

// newID returns a fresh AG-UI id: the runId and the position of the
// event about to be emitted, which opens the run first if needed so the
// id names the event that starts what it identifies.
func (p *Projector) newID() string {
	if p.st.Run == "" {
		p.openRun(nil)
	}
	return p.runID + ":" + p.pos.String()
}

// openRun starts an AG-UI run: the baton run's first is named by its
// runId, a later one (the next turn) by its position.
func (p *Projector) openRun(status json.RawMessage) {
	id := p.runID
	if p.st.Runs > 0 {
		id += ":" + p.pos.String()
	}
	p.st.Runs++
	p.st.Run = id
	p.emit(Event{Type: RunStarted, ThreadID: p.threadID, RunID: id, RawEvent: status})
	if p.st.Runs == 1 && len(p.jobInput) > 0 {
		p.jobEcho(p.jobInput)
	}
}

// closeRun ends the open run (opening one if none is, so the end is
// always told): it ends what is still open, gives each tool call still
// waiting a result saying it got none (AG-UI clients take a tool call
// without a result for one they must run themselves), and finishes the
// run by st (waiting or terminal) and the agent's account of the turn.
func (p *Projector) closeRun(st protocol.Status, status json.RawMessage) {
	if p.st.Run == "" {
		p.openRun(nil)
	}
	for len(p.st.Open) > 0 {
		p.end(p.st.Open[0].Key)
	}
	why := "no result: the turn ended"
	if st.Status.Terminal() {
		why = "no result: the run ended (" + string(st.Status) + ")"
	}
	// A turn that stops at a prompt a person is asked about is
	// interrupted, not over: the tool calls the prompts are about wait on.
	interrupt := len(p.st.Asks) > 0 && (st.Status == protocol.StatusWaiting || st.Status == protocol.StatusPaused)
	var waitOn []entity
	for len(p.st.Pending) > 0 {
		if interrupt && !st.Status.Terminal() && p.asked(p.st.Pending[0].ID) {
			waitOn = append(waitOn, p.st.Pending[0])
			p.st.Pending = p.st.Pending[1:]
			continue
		}
		p.abandon(why)
	}
	p.st.Pending = waitOn
	t := p.st.Turn
	if t == nil {
		t = &turn{}
	}
	result := mustJSON(struct {
		Status json.RawMessage `json:"status"`
		Turn   json.RawMessage `json:"turn,omitempty"`
	}{status, t.Line})
	switch {
	case st.Status == protocol.StatusFailed || st.Status == protocol.StatusTimeout || st.Status == protocol.StatusLost:
		msg := st.Reason
		if msg == "" {
			msg = "run " + string(st.Status)
		}
		p.emit(Event{Type: RunError, Message: msg, Code: string(st.Status), Usage: t.Usage, RawEvent: result})
	case st.Status == protocol.StatusCancelled || t.Cancelled || t.Error != "" && p.st.Interrupted:
		p.finish(OutcomeCancelled, result, t.Usage)
	case interrupt:
		p.emit(Event{Type: RunFinished, ThreadID: p.threadID, RunID: p.st.Run,
			Outcome: &Outcome{Type: OutcomeInterrupt, Interrupts: p.interrupts()}, Result: result, Usage: t.Usage})
	case t.Error != "":
		p.emit(Event{Type: RunError, Message: t.Error, Code: t.Code, Usage: t.Usage, RawEvent: result})
	default:
		p.finish(OutcomeSuccess, result, t.Usage)
	}
	p.st.Run, p.st.Turn, p.st.Interrupted = "", nil, false
	p.st.Msg, p.st.Streamed, p.st.Parent = "", false, ""
	p.st.AskWait = nil
	if st.Status.Terminal() {
		// Nothing waits on an answer once the run ended.
		p.st.Asks = nil
	}
}

func (p *Projector) finish(o OutcomeType, result json.RawMessage, usage []TokenUsage) {
	p.emit(Event{Type: RunFinished, ThreadID: p.threadID, RunID: p.st.Run, Outcome: &Outcome{Type: o}, Result: result, Usage: usage})
}

// errorMeta marks a tool result that is an error: AG-UI's result has no
// field for it.
var errorMeta = json.RawMessage(`{"isError":true}`)

// status projects a status message.
func (p *Projector) status(data []byte) {
	st, err := protocol.ParseStatus(data)
	if err != nil || st.Status == "" {
		p.raw(data, "baton")
		return
	}
	raw := compact(data)
	switch {
	case st.Status == protocol.StatusStarted && p.st.Run == "":
		p.openRun(raw)
	case st.Status == protocol.StatusWaiting && st.Reason == protocol.ReasonApproval && len(p.st.Asks) == 0:
		// Waiting on a prompt whose line comes next: the turn ends there.
		p.custom("baton.waiting", raw)
		p.st.AskWait = raw
	case st.Status == protocol.StatusWaiting:
		p.custom("baton.waiting", raw)
		p.closeRun(st, raw)
	case st.Status.Terminal():
		p.closeRun(st, raw)
	default:
		p.st.AskWait = nil
		p.custom("baton."+string(st.Status), raw)
	}
}

// custom emits a CUSTOM event; v is JSON already when a RawMessage.
func (p *Projector) custom(name string, v any) {
	p.emit(Event{Type: Custom, Name: name, Value: mustJSON(v)})
}

// raw emits line as a RAW event when it is JSON, else as baton.raw.
func (p *Projector) raw(line []byte, source string) {
	if !json.Valid(line) {
		p.custom("baton.raw", map[string]string{"line": string(line)})
		return
	}
	p.emit(Event{Type: Raw, RawPayload: compact(line), Source: source})
}

func mustJSON(v any) json.RawMessage {
	if r, ok := v.(json.RawMessage); ok {
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain values and valid JSON reach here
	}
	return b
}

// compact returns valid JSON b without insignificant space, so the
// events carry it the same however the agent spaced it.
func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		panic(err) // callers pass valid JSON
	}
	return buf.Bytes()
}

// line projects an events line by the dialect.
func (p *Projector) line(data []byte) {
	if !json.Valid(data) {
		p.raw(data, "agent")
		return
	}
	d := p.dialect
	if d == "" {
		if p.st.Dialect == "" {
			p.st.Dialect = sniff(data)
		}
		d = p.st.Dialect
	}
	switch d {
	case DialectClaude:
		p.claude(data)
	case DialectCodexExec:
		p.codexExec(data)
	case DialectCodexAppServer:
		p.codexApp(data)
	default:
		p.raw(data, "agent")
	}
}

// find returns the index of the entity with key in list, or -1.
func find(list []entity, key string) int {
	for i, e := range list {
		if e.Key == key {
			return i
		}
	}
	return -1
}

// startText opens a text message (role assistant) under key.
func (p *Projector) startText(key string) *entity {
	id := p.newID()
	p.emit(Event{Type: TextMessageStart, MessageID: id, Role: "assistant"})
	p.st.Parent = id
	return p.opened(entity{Key: key, Kind: kindText, ID: id, Sum: fnvOffset})
}

// opened adds e to the open streams, ending the oldest past maxOpen.
func (p *Projector) opened(e entity) *entity {
	p.st.Open = append(p.st.Open, e)
	if len(p.st.Open) > maxOpen {
		p.end(p.st.Open[0].Key)
	}
	return &p.st.Open[len(p.st.Open)-1]
}

// waiting adds a tool call to those waiting for a result, giving the
// oldest one up past maxPending.
func (p *Projector) waiting(t entity) {
	p.st.Pending = append(p.st.Pending, t)
	if len(p.st.Pending) > maxPending {
		p.abandon("no result: too many tool calls were waiting for theirs")
	}
}

// abandon gives the oldest tool call waiting a result saying why it has
// none.
func (p *Projector) abandon(why string) {
	t := p.st.Pending[0]
	p.st.Pending = p.st.Pending[1:]
	p.emit(Event{Type: ToolCallResult, MessageID: p.newID(), ToolCallID: t.ID, Content: &why, Role: "tool", Metadata: errorMeta})
}

// startReasoning opens a reasoning span and its message under key; both
// carry one id, as the protocol allows.
func (p *Projector) startReasoning(key string) *entity {
	id := p.newID()
	p.emit(Event{Type: ReasoningStart, MessageID: id})
	p.emit(Event{Type: ReasoningMessageStart, MessageID: id, Role: "reasoning"})
	return p.opened(entity{Key: key, Kind: kindReasoning, ID: id, Sum: fnvOffset})
}

// startTool opens a tool call under key (its arguments to stream), for
// the agent's tool id toolID.
func (p *Projector) startTool(key, toolID, name string) {
	if name == "" {
		name = "tool"
	}
	id := p.newID()
	p.emit(Event{Type: ToolCallStart, ToolCallID: id, ToolCallName: name, ParentMessageID: p.st.Parent})
	p.opened(entity{Key: key, Kind: kindTool, ID: id, Tool: toolID})
}

// delta appends text to the open stream e.
func (p *Projector) delta(e *entity, text string) {
	if text == "" {
		return
	}
	switch e.Kind {
	case kindText:
		p.emit(Event{Type: TextMessageContent, MessageID: e.ID, Delta: text})
	case kindReasoning:
		p.emit(Event{Type: ReasoningMessageContent, MessageID: e.ID, Delta: text})
	case kindTool:
		p.emit(Event{Type: ToolCallArgs, ToolCallID: e.ID, Delta: text})
	}
}

// open returns the open stream with key, or nil.
func (p *Projector) open(key string) *entity {
	if i := find(p.st.Open, key); i >= 0 {
		return &p.st.Open[i]
	}
	return nil
}

// end closes the open stream with key: a tool call's arguments end and
// it waits for its result.
func (p *Projector) end(key string) {
	i := find(p.st.Open, key)
	if i < 0 {
		return
	}
	e := p.st.Open[i]
	p.st.Open = append(p.st.Open[:i], p.st.Open[i+1:]...)
	switch e.Kind {
	case kindText:
		p.emit(Event{Type: TextMessageEnd, MessageID: e.ID})
	case kindReasoning:
		p.emit(Event{Type: ReasoningMessageEnd, MessageID: e.ID})
		p.emit(Event{Type: ReasoningEnd, MessageID: e.ID})
	case kindTool:
		p.emit(Event{Type: ToolCallEnd, ToolCallID: e.ID})
		p.waiting(entity{Key: e.Tool, Kind: kindTool, ID: e.ID})
	}
}

// tool emits a whole tool call: start, arguments, end.
func (p *Projector) tool(toolID, name string, args []byte) {
	key := "tool:" + toolID
	p.startTool(key, toolID, name)
	p.delta(p.open(key), string(args))
	p.end(key)
}

// known reports whether the agent's tool call toolID was started and has
// no result yet.
func (p *Projector) known(toolID string) bool {
	for _, e := range p.st.Open {
		if e.Kind == kindTool && e.Tool == toolID {
			return true
		}
	}
	return p.toolID(toolID) != ""
}

// toolID returns the AG-UI id of the pending tool call of the agent's
// toolID, or "".
func (p *Projector) toolID(toolID string) string {
	if i := find(p.st.Pending, toolID); i >= 0 {
		return p.st.Pending[i].ID
	}
	return ""
}

// result emits the result of the agent's tool call toolID; a result for
// no pending call is passed on as RAW line.
func (p *Projector) result(toolID, content string, isError bool, line []byte, source string) {
	i := find(p.st.Pending, toolID)
	if i < 0 {
		p.raw(line, source)
		return
	}
	id := p.st.Pending[i].ID
	p.st.Pending = append(p.st.Pending[:i], p.st.Pending[i+1:]...)
	// What the agent says after a tool's result is a new message.
	p.st.Parent = ""
	ev := Event{Type: ToolCallResult, MessageID: p.newID(), ToolCallID: id, Content: &content, Role: "tool"}
	if isError {
		ev.Metadata = errorMeta
	}
	p.emit(ev)
}

// turnEnd records the agent's account of its turn for the run's end.
func (p *Projector) turnEnd(line []byte, t turn) {
	if prev := p.st.Turn; prev != nil && t.Usage == nil {
		t.Usage = prev.Usage
	}
	t.Line = compact(line)
	p.st.Turn = &t
}
