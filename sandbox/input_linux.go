package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// InputConn is a worker's connection to a run's runner, which writes the
// input messages it is handed to the agent's stdin.
type InputConn struct {
	c     *net.UnixConn
	r     *bufio.Reader
	state InputState
}

// DialInput connects to the runner of the run in dir and reads where its
// stdin stands. It fails with ErrNoInput when the run takes no input
// messages or its runner has ended.
func DialInput(ctx context.Context, dir journal.Dir) (*InputConn, error) {
	nc, err := dialRunner(ctx, dir, chain.InputSocketPath, ErrNoInput, "input")
	if err != nil {
		return nil, err
	}
	c := &InputConn{c: nc, r: bufio.NewReaderSize(nc, 4<<10)}
	if err := c.read(ctx, &c.state); err != nil {
		nc.Close()
		return nil, fmt.Errorf("sandbox: read the runner's input state: %w", err)
	}
	return c, nil
}

// State is the runner's latest answer.
func (c *InputConn) State() InputState { return c.state }

// Write hands m to the runner and returns its answer once m is written to
// stdin (or was before). ctx bounds the wait: the runner answers only once
// the agent has taken the bytes into its pipe. A refusal wraps
// ErrInputRefused.
func (c *InputConn) Write(ctx context.Context, m InputMessage) (InputState, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetWriteDeadline(dl)
	} else {
		_ = c.c.SetWriteDeadline(time.Time{})
	}
	if err := chain.WriteFrame(c.c, m); err != nil {
		return c.state, fmt.Errorf("sandbox: send input %d: %w", m.Seq, err)
	}
	var st InputState
	if err := c.read(ctx, &st); err != nil {
		return c.state, fmt.Errorf("sandbox: input %d: %w", m.Seq, err)
	}
	c.state = st
	if st.Error != "" {
		return st, fmt.Errorf("%w: %s", ErrInputRefused, st.Error)
	}
	return st, nil
}

func (c *InputConn) read(ctx context.Context, v any) error {
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetReadDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetReadDeadline(dl)
	} else {
		_ = c.c.SetReadDeadline(time.Time{})
	}
	return chain.ReadFrame(c.r, v)
}

// Close closes the connection.
func (c *InputConn) Close() error { return c.c.Close() }

// dialRunner connects to the socket of the run in dir that socketPath
// names (what of the runner's it serves). A socket that is not there, or
// whose runner has ended, fails with absent.
func dialRunner(ctx context.Context, dir journal.Dir, socketPath func(journal.Dir) (*os.File, string, error), absent error, what string) (*net.UnixConn, error) {
	d, path, err := socketPath(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var dl net.Dialer
	nc, err := dl.DialContext(ctx, "unix", path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w: %v", absent, err)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: dial the %s socket: %w", what, err)
	}
	return nc.(*net.UnixConn), nil
}
