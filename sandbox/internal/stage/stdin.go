package stage

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// errStdinClosed: the agent's stdin was closed (end of input, or the
// agent closed its end or exited), so no input can be written anymore.
var errStdinClosed = errors.New("the agent's stdin is closed")

// agentStdin is the write end of the agent's stdin pipe. runner-outer is
// its only writer: first the job's input, then (stdin "stream") the run's
// input messages, one at a time and in order.
type agentStdin struct {
	mu     sync.Mutex // held by the write in progress
	w      io.WriteCloser
	closed bool
	last   uint64 // input stream sequence of the last message written
	st     *state
	// interruptLine is written on an interrupt; nil: signal is called.
	interruptLine []byte
	signal        func() error
}

// feedStdin writes input (the job's input file) to w from a goroutine,
// then closes w, or with keepOpen leaves it open for input messages. It
// holds the writer until the input is written, so messages follow it.
// input is closed once read.
func feedStdin(w io.WriteCloser, input io.ReadCloser, keepOpen bool, st *state, interruptLine []byte, signal func() error) *agentStdin {
	s := &agentStdin{w: w, st: st, interruptLine: interruptLine, signal: signal}
	s.mu.Lock()
	go func() {
		defer s.mu.Unlock()
		n, err := io.Copy(w, input)
		input.Close()
		switch {
		case err != nil:
			// The agent exited or closed its stdin before reading it all:
			// its business, as it is any program's.
			s.st.fail("stdin", fmt.Errorf("write the input (%d bytes written): %w", n, err))
			s.closeLocked()
		case keepOpen:
			s.st.ok("stdin", fmt.Sprintf("input written, %d bytes; stdin stays open for input messages", n))
		default:
			s.st.ok("stdin", fmt.Sprintf("input written, %d bytes; stdin closed", n))
			s.closeLocked()
		}
	}()
	return s
}

func (s *agentStdin) closeLocked() {
	if !s.closed {
		s.closed = true
		_ = s.w.Close()
	}
}

// close closes stdin once the write in progress, if any, is done.
func (s *agentStdin) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}
