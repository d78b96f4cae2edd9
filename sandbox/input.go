package sandbox

import (
	"errors"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

// ErrNoInput: the run takes no input messages (its stdin is "once"), or
// its runner has ended.
var ErrNoInput = errors.New("sandbox: the run's runner takes no input")

// ErrInputRefused: the runner refused an input message (a gap in the
// sequence, or stdin closed); the reply says why.
var ErrInputRefused = errors.New("sandbox: input refused")

// InputMessage is one input message for the agent's stdin, as the worker
// hands it to the runner (package internal/chain has its fields: the
// runner reads it too).
type InputMessage = chain.InputMessage

// InputState is the runner's answer on a new connection and to each
// message: the last message written to stdin, and whether stdin is
// closed (package internal/chain has its fields).
type InputState = chain.InputState
