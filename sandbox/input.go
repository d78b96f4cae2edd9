package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/journal"
)

// ErrNoInput: the run takes no input messages (its stdin is "once"), or
// its runner has ended.
var ErrNoInput = errors.New("sandbox: the run's runner takes no input")

// ErrInputRefused: the runner refused an input message (a gap in the
// sequence, or stdin closed); the reply says why.
var ErrInputRefused = errors.New("sandbox: input refused")

// InputMessage is one input message for the agent's stdin, as the worker
// hands it to the runner.
type InputMessage struct {
	// Seq is the message's input stream sequence, Prev the sequence of
	// the run's message before it (0 for the first): the runner writes a
	// message only right after Prev, and a Seq it is past not again.
	Seq  uint64 `json:"seq"`
	Prev uint64 `json:"prev"`
	// EOF closes the agent's stdin after Data.
	EOF bool `json:"eof,omitempty"`
	// Interrupt asks the runner to interrupt the agent's turn, as its
	// profile says (Data is then empty).
	Interrupt bool   `json:"interrupt,omitempty"`
	Data      []byte `json:"data"`
}

// InputState is the runner's answer on a new connection and to each
// message: the last message written to stdin, and whether stdin is closed.
type InputState struct {
	Last   uint64 `json:"last"`
	Closed bool   `json:"closed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// maxInputFrame bounds one frame on the input socket: a message of the
// largest maxInputBytes, base64 in JSON, with room to spare.
const maxInputFrame = 1 << 20

// readFrame reads one JSON line of at most maxInputFrame bytes into v.
func readFrame(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxInputFrame {
			return fmt.Errorf("input frame over %d bytes", maxInputFrame)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("input frame: %w", err)
	}
	return nil
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// inputLine is what m puts on stdin: its data as one line, a newline added
// if missing; nothing for an empty end-of-input.
func inputLine(m InputMessage) []byte {
	if len(m.Data) == 0 && m.EOF {
		return nil
	}
	if len(m.Data) > 0 && m.Data[len(m.Data)-1] == '\n' {
		return m.Data
	}
	return append(append(make([]byte, 0, len(m.Data)+1), m.Data...), '\n')
}

// state returns where stdin stands.
func (s *agentStdin) state() InputState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return InputState{Last: s.last, Closed: s.closed}
}

// deliver writes m to stdin once, right after the message before it, and
// records it in the journal first (record), so the input sits before
// whatever the agent answers.
func (s *agentStdin) deliver(m InputMessage, record func(journal.InputRecord) error, nonce string) InputState {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.Seq == 0:
		return InputState{Last: s.last, Closed: s.closed, Error: "input message with sequence 0"}
	case m.Seq <= s.last:
		// Written before (a worker retrying, or its successor): not again.
		return InputState{Last: s.last, Closed: s.closed}
	case m.Prev != s.last:
		return InputState{Last: s.last, Closed: s.closed, Error: fmt.Sprintf("input %d follows %d, but the last written is %d", m.Seq, m.Prev, s.last)}
	case m.Interrupt && s.interruptLine == nil:
		// SIGINT needs no stdin: it works on any run, stdin closed or not.
		if err := record(journal.InputRecord{Seq: m.Seq, Nonce: nonce, Interrupt: true}); err != nil {
			return InputState{Last: s.last, Closed: s.closed, Error: "record the interrupt in the journal: " + err.Error()}
		}
		s.last = m.Seq
		if err := s.signal(); err != nil {
			s.st.fail("interrupt", fmt.Errorf("interrupt %d: %w", m.Seq, err))
			return InputState{Last: s.last, Closed: s.closed, Error: "send SIGINT: " + err.Error()}
		}
		s.st.ok("interrupt", fmt.Sprintf("interrupt %d: SIGINT sent", m.Seq))
		return InputState{Last: s.last, Closed: s.closed}
	case m.Interrupt:
		m = InputMessage{Seq: m.Seq, Prev: m.Prev, Interrupt: true, Data: s.interruptLine}
	}
	if s.closed {
		// Accepted before the agent's stdin closed (the agent closed it,
		// or exited): it cannot be written, and is passed over so what
		// follows (interrupts) still comes.
		s.last = m.Seq
		s.st.fail("input", fmt.Errorf("input %d not written: %w", m.Seq, errStdinClosed))
		return InputState{Last: s.last, Closed: true, Error: errStdinClosed.Error()}
	}
	line := inputLine(m)
	if err := record(journal.InputRecord{Seq: m.Seq, Nonce: nonce, EOF: m.EOF, Interrupt: m.Interrupt, Data: line}); err != nil {
		return InputState{Last: s.last, Error: "record the input in the journal: " + err.Error()}
	}
	s.last = m.Seq
	if len(line) > 0 {
		if _, err := s.w.Write(line); err != nil {
			s.st.fail("input", fmt.Errorf("write input %d: %w", m.Seq, err))
			s.closeLocked()
			return InputState{Last: s.last, Closed: true, Error: errStdinClosed.Error() + ": " + err.Error()}
		}
	}
	if m.EOF {
		s.st.ok("input", fmt.Sprintf("input %d written; end of input, stdin closed", m.Seq))
		s.closeLocked()
	}
	return InputState{Last: s.last, Closed: s.closed}
}

// serveInputConn answers one worker's connection: the state first, then
// one answer per message, until the connection ends.
func (s *agentStdin) serveInputConn(c io.ReadWriter, record func(journal.InputRecord) error, nonce string) error {
	if err := writeFrame(c, s.state()); err != nil {
		return err
	}
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		var m InputMessage
		if err := readFrame(r, &m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := writeFrame(c, s.deliver(m, record, nonce)); err != nil {
			return err
		}
	}
}
