package chain

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

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
	// Headers are the chain headers of what baton itself writes (an
	// approval's decision, a follow-up turn), which the runner journals
	// with the input so the chain says who decided.
	Headers map[string]string `json:"headers,omitempty"`
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

// ReadFrame reads one JSON line of at most maxInputFrame bytes into v.
func ReadFrame(r *bufio.Reader, v any) error {
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

// WriteFrame writes v as one JSON line.
func WriteFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
