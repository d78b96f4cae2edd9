package stage

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// inputLine is what m puts on stdin: its data as one line, a newline added
// if missing; nothing for an empty end-of-input.
func inputLine(m chain.InputMessage) []byte {
	if len(m.Data) == 0 && m.EOF {
		return nil
	}
	if len(m.Data) > 0 && m.Data[len(m.Data)-1] == '\n' {
		return m.Data
	}
	return append(append(make([]byte, 0, len(m.Data)+1), m.Data...), '\n')
}

// state returns where stdin stands.
func (s *agentStdin) state() chain.InputState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return chain.InputState{Last: s.last, Closed: s.closed}
}

// deliver writes m to stdin once, right after the message before it, and
// records it in the journal first (record), so the input sits before
// whatever the agent answers.
func (s *agentStdin) deliver(m chain.InputMessage, record func(journal.InputRecord) error, nonce string) chain.InputState {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.Seq == 0:
		return chain.InputState{Last: s.last, Closed: s.closed, Error: "input message with sequence 0"}
	case m.Seq <= s.last:
		// Written before (a worker retrying, or its successor): not again.
		return chain.InputState{Last: s.last, Closed: s.closed}
	case m.Prev != s.last:
		return chain.InputState{Last: s.last, Closed: s.closed, Error: fmt.Sprintf("input %d follows %d, but the last written is %d", m.Seq, m.Prev, s.last)}
	case m.Interrupt && s.interruptLine == nil:
		// SIGINT needs no stdin: it works on any run, stdin closed or not.
		if err := record(journal.InputRecord{Seq: m.Seq, Nonce: nonce, Interrupt: true}); err != nil {
			return chain.InputState{Last: s.last, Closed: s.closed, Error: "record the interrupt in the journal: " + err.Error()}
		}
		s.last = m.Seq
		if err := s.signal(); err != nil {
			s.st.fail("interrupt", fmt.Errorf("interrupt %d: %w", m.Seq, err))
			return chain.InputState{Last: s.last, Closed: s.closed, Error: "send SIGINT: " + err.Error()}
		}
		s.st.ok("interrupt", fmt.Sprintf("interrupt %d: SIGINT sent", m.Seq))
		return chain.InputState{Last: s.last, Closed: s.closed}
	case m.Interrupt:
		m = chain.InputMessage{Seq: m.Seq, Prev: m.Prev, Interrupt: true, Data: s.interruptLine}
	}
	if s.closed {
		// Accepted before the agent's stdin closed (the agent closed it,
		// or exited): it cannot be written, and is passed over so what
		// follows (interrupts) still comes.
		s.last = m.Seq
		s.st.fail("input", fmt.Errorf("input %d not written: %w", m.Seq, errStdinClosed))
		return chain.InputState{Last: s.last, Closed: true, Error: errStdinClosed.Error()}
	}
	line := inputLine(m)
	if err := record(journal.InputRecord{Seq: m.Seq, Nonce: nonce, EOF: m.EOF, Interrupt: m.Interrupt, Data: line, Headers: m.Headers}); err != nil {
		return chain.InputState{Last: s.last, Error: "record the input in the journal: " + err.Error()}
	}
	s.last = m.Seq
	if len(line) > 0 {
		if _, err := s.w.Write(line); err != nil {
			s.st.fail("input", fmt.Errorf("write input %d: %w", m.Seq, err))
			s.closeLocked()
			return chain.InputState{Last: s.last, Closed: true, Error: errStdinClosed.Error() + ": " + err.Error()}
		}
	}
	if m.EOF {
		s.st.ok("input", fmt.Sprintf("input %d written; end of input, stdin closed", m.Seq))
		s.closeLocked()
	}
	return chain.InputState{Last: s.last, Closed: s.closed}
}

// serveInputConn answers one worker's connection: the state first, then
// one answer per message, until the connection ends.
func (s *agentStdin) serveInputConn(c io.ReadWriter, record func(journal.InputRecord) error, nonce string) error {
	if err := chain.WriteFrame(c, s.state()); err != nil {
		return err
	}
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		var m chain.InputMessage
		if err := chain.ReadFrame(r, &m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := chain.WriteFrame(c, s.deliver(m, record, nonce)); err != nil {
			return err
		}
	}
}
