package sandbox

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// ErrNoTools: the run has no tools socket (its profile lists no tools),
// or its runner has ended.
var ErrNoTools = errors.New("sandbox: the run's runner serves no tools")

// ToolsConn is a worker's connection to a run's runner for host tools:
// the runner sends every call still unanswered, then each new one, and
// takes the worker's answers.
type ToolsConn struct {
	c  *net.UnixConn
	r  *bufio.Reader
	mu sync.Mutex // one reply written at a time
}

// DialTools connects to the runner of the run in dir. It fails with
// ErrNoTools when the run has no tools or its runner has ended.
func DialTools(ctx context.Context, dir journal.Dir) (*ToolsConn, error) {
	nc, err := dialRunner(ctx, dir, chain.ToolsSocketPath, ErrNoTools, "tools")
	if err != nil {
		return nil, err
	}
	return &ToolsConn{c: nc, r: bufio.NewReaderSize(nc, 64<<10)}, nil
}

// Next reads the runner's next request; it fails once the connection
// ends (Close ends a wait).
func (c *ToolsConn) Next() (ToolRequest, error) {
	var req ToolRequest
	err := chain.ReadFrame(c.r, &req)
	return req, err
}

// Reply hands the runner an answer.
func (c *ToolsConn) Reply(r ToolReply) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return chain.WriteFrame(c.c, r)
}

// Close closes the connection.
func (c *ToolsConn) Close() error { return c.c.Close() }
