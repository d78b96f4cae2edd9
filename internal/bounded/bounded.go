package bounded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// WaitDelay bounds how long Wait waits for a process's output pipes once
// the process has exited or been killed: a grandchild that inherited them
// may hold them open forever.
const WaitDelay = 2 * time.Second

// MaxOutput is how much of a command's output Output keeps.
const MaxOutput = 64 << 10

// ErrTimeout: a process did not end within its limit and was killed.
var ErrTimeout = errors.New("timed out")

// Command is exec.CommandContext with WaitDelay set: ctx's end kills the
// process, and Wait returns at most WaitDelay after the process ended,
// whoever holds its pipes.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = WaitDelay
	return cmd
}

// Output runs cmd, not yet started and with Stdout and Stderr unset, to
// its end within limit, and returns what it wrote on both (the first
// MaxOutput bytes). Still running at limit or at ctx's end, it is killed,
// and the error wraps ErrTimeout (or ctx's error). Every error begins with
// the command line. Without its own WaitDelay, cmd gets WaitDelay.
func Output(ctx context.Context, limit time.Duration, cmd *exec.Cmd) ([]byte, error) {
	within := limit
	if d, ok := ctx.Deadline(); ok && time.Until(d) < limit {
		within = time.Until(d).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out := &Buffer{Limit: MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = WaitDelay
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", Describe(cmd), err)
	}
	killed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = cmd.Process.Kill()
		close(killed)
	})
	err := cmd.Wait()
	if !stop() {
		<-killed
		if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
			return out.Bytes(), fmt.Errorf("%s: %w: killed", Describe(cmd), cause)
		}
		return out.Bytes(), fmt.Errorf("%s: %w: did not end within %v, killed",
			Describe(cmd), ErrTimeout, within)
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w", Describe(cmd), err)
	}
	return out.Bytes(), nil
}

// Describe is cmd's command line, cut short, for messages.
func Describe(cmd *exec.Cmd) string {
	s := strings.Join(cmd.Args, " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Buffer is a writer, safe for concurrent use, that keeps the first Limit
// bytes written to it and takes the rest without keeping it.
type Buffer struct {
	Limit int
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.Limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Bytes is a copy of what the buffer kept.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *Buffer) String() string { return string(b.Bytes()) }
