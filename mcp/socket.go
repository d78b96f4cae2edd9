package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// SocketAddr is the tools socket runner-outer serves in the sandbox: an
// abstract unix socket, so it exists in the sandbox's network namespace
// only, with no file the agent could see elsewhere or another run reach.
const SocketAddr = "@baton-tools"

// MaxAnswer bounds one answer on the tools socket: a tool's answer is
// bounded far below it (the profile's toolLimits.bytes).
const MaxAnswer = 2 << 20

// Ops of a SocketRequest.
const (
	OpList = "list"
	OpCall = "call"
)

// SocketRequest is one request on the tools socket, one JSON line; each
// connection carries one request and its answer.
type SocketRequest struct {
	Op   string          `json:"op"`
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

// SocketAnswer is runner-outer's answer: the tools, or a call's result,
// or why not (Unknown: the tool is not the run's).
type SocketAnswer struct {
	Tools   []Tool  `json:"tools,omitempty"`
	Result  *string `json:"result,omitempty"`
	Error   string  `json:"error,omitempty"`
	Unknown bool    `json:"unknown,omitempty"`
}

// SocketBackend is the Backend `baton mcp` uses: each request a
// connection to runner-outer's tools socket at Addr.
type SocketBackend struct{ Addr string }

// dialWait bounds connecting: runner-outer serves the socket as long as
// the sandbox runs.
const dialWait = 5 * time.Second

func (b SocketBackend) ask(ctx context.Context, req SocketRequest) (SocketAnswer, error) {
	d := net.Dialer{Timeout: dialWait}
	c, err := d.DialContext(ctx, "unix", b.Addr)
	if err != nil {
		return SocketAnswer{}, fmt.Errorf("baton's tools socket (waited up to %v): %w", dialWait, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	line, err := json.Marshal(req)
	if err != nil {
		return SocketAnswer{}, err
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return SocketAnswer{}, fmt.Errorf("send to baton's tools socket: %w", err)
	}
	ans, tooLong, err := readLine(bufio.NewReader(c), MaxAnswer)
	switch {
	case err != nil:
		return SocketAnswer{}, fmt.Errorf("no answer on baton's tools socket: %w", err)
	case tooLong:
		return SocketAnswer{}, fmt.Errorf("answer on baton's tools socket longer than %d bytes", MaxAnswer)
	}
	var a SocketAnswer
	if err := json.Unmarshal(ans, &a); err != nil {
		return SocketAnswer{}, fmt.Errorf("answer on baton's tools socket: %w", err)
	}
	return a, nil
}

// List asks runner-outer for the run's tools.
func (b SocketBackend) List(ctx context.Context) ([]Tool, error) {
	a, err := b.ask(ctx, SocketRequest{Op: OpList})
	if err != nil {
		return nil, err
	}
	if a.Error != "" {
		return nil, errors.New(a.Error)
	}
	return a.Tools, nil
}

// Call hands the call to runner-outer and waits for its answer.
func (b SocketBackend) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	a, err := b.ask(ctx, SocketRequest{Op: OpCall, Name: name, Args: args})
	switch {
	case err != nil:
		return "", err
	case a.Unknown:
		return "", fmt.Errorf("%w: %s", ErrUnknownTool, a.Error)
	case a.Error != "":
		return "", errors.New(a.Error)
	case a.Result == nil:
		return "", errors.New("baton's tools socket answered neither a result nor an error")
	}
	return *a.Result, nil
}
