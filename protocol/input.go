package protocol

// InputSubject is where a client sends input for runID's agent, as a
// request: workers answer it in one queue group (see InputReply), check
// the run and the message, and store it on InputStoreSubject. A message
// published there without a reply subject is refused like a bad one.
func (n Names) InputSubject(runID string) string { return n.prefix + ".input." + runID }

// InputRequests is the subject workers answer input requests on.
func (n Names) InputRequests() string { return n.prefix + ".input.*" }

// InputStream is the stream holding the input messages workers accepted,
// so input survives a worker's death until the run's runner wrote it.
func (n Names) InputStream() string { return n.upper + "_INPUT" }

// InputStoreSubject is where an accepted input message of runID is
// stored. Only workers publish there, each message with
// HeaderInputPrev, the stream sequence of the run's message before it.
func (n Names) InputStoreSubject(runID string) string { return n.prefix + ".inputs." + runID }

// InputStoreSubjects are the subjects of the input stream.
func (n Names) InputStoreSubjects() string { return n.prefix + ".inputs.*" }

// InputSubjectOf is the chain subject on which each input, once written to
// the agent's stdin, appears between the lines it came between (kind
// KindInput).
func (n Names) InputSubjectOf(runID string) string { return n.prefix + ".runs." + runID + ".input" }

// KindInput is the chain's input messages: the bytes written to the
// agent's stdin, with HeaderInputSeq and, after the last one,
// HeaderInputEOF.
const KindInput RunKind = "input"

// Input headers.
const (
	// HeaderInputEOF ("true") on an input request closes the agent's stdin
	// once this message (which may be empty) is written; on the chain, it
	// marks the input after which stdin was closed.
	HeaderInputEOF = "Baton-Input-EOF"
	// HeaderInputSeq is the input stream's sequence of the message, on the
	// chain's input messages.
	HeaderInputSeq = "Baton-Input-Seq"
	// HeaderInputPrev is the stream sequence of the run's previous input
	// message (0 for the first) on a stored input message: the runner
	// writes a message only right after that one, so none is skipped.
	HeaderInputPrev = "Baton-Input-Prev"
	// HeaderInputKind is "interrupt" on an interrupt (stored, and on the
	// chain); input messages have none.
	HeaderInputKind = "Baton-Input-Kind"
)

// InputKindInterrupt is HeaderInputKind's value on an interrupt.
const InputKindInterrupt = "interrupt"

// InterruptSubject is where a client asks for runID's agent to be
// interrupted, as a request: workers answer it in one queue group, like
// input (the answer is an InputReply), and the interrupt is stored in
// order with the run's input. The profile says how the runner interrupts
// (SIGINT, or a line on stdin); the run goes on.
func (n Names) InterruptSubject(runID string) string { return n.prefix + ".control.interrupt." + runID }

// InterruptRequests is the subject workers answer interrupt requests on.
func (n Names) InterruptRequests() string { return n.prefix + ".control.interrupt.*" }

// InputReply is a worker's answer to an input request it accepted: the
// message is stored and will be written to the agent's stdin once, after
// every message accepted before it.
type InputReply struct {
	RunID string `json:"runId"`
	// Seq is the message's sequence in the input stream; the chain's
	// input message for it carries the same HeaderInputSeq.
	Seq uint64 `json:"seq"`
}

// Error codes of a refused input request, in the reply's
// Nats-Service-Error-Code header (the description is in Nats-Service-Error).
const (
	InputBadRunID  = "400" // the subject's last token is not a valid runId
	InputNotFound  = "404" // no run record has that runId
	InputNotStream = "405" // the run's profile has stdin "once": it takes no input
	InputTerminal  = "409" // the run has ended, or its stdin was closed by an earlier end-of-input
	InputTooLarge  = "413" // the message is over the configuration's maxInputBytes
	InputFailed    = "503" // the record could not be read or the message stored; try again
)

// InputNoticeSubject is where the worker that stored an input message of
// runID tells the workers, so the one holding the run hands it to the
// runner at once. Only workers publish there; the stream is what counts.
func (n Names) InputNoticeSubject(runID string) string { return n.prefix + ".control.input." + runID }

// InputNotices is the subject every worker listens on for InputNoticeSubject.
func (n Names) InputNotices() string { return n.prefix + ".control.input.*" }
