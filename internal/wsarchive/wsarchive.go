// Package wsarchive reads workspace archives from the workspaces stream,
// where clients upload them by their content (see protocol.WorkspaceChunkSubject).
package wsarchive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// ErrNotStored is an archive whose size record is not in the stream: never
// uploaded, not finished, or expired.
var ErrNotStored = errors.New("not stored")

// ErrBadChunk is a chunk missing or of the wrong length: the upload was not
// finished, or someone published other content under the digest first.
var ErrBadChunk = errors.New("bad chunk")

// getTimeout bounds one chunk's or size record's get.
const getTimeout = 10 * time.Second

// window is how many chunks are fetched ahead of the one being read: the
// gets' round trips overlap, and at most window+1 chunks wait in memory.
const window = 16

// Size reads the size record of the archive of SHA-256 digest (hex).
func Size(ctx context.Context, s jetstream.Stream, n protocol.Names, digest string) (uint64, error) {
	msg, err := getLast(ctx, s, n.WorkspaceSizeSubject(digest))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, ErrNotStored
	}
	if err != nil {
		return 0, err
	}
	size, ok := protocol.ParseWorkspaceSize(msg.Data)
	if !ok {
		return 0, fmt.Errorf("%w: its size record %.40q is not a decimal size", ErrBadChunk, msg.Data)
	}
	return size, nil
}

// Open streams the archive of SHA-256 digest (hex) and size bytes, its
// chunks in order. Reading fails with ErrBadChunk when a chunk is missing
// or not as long as the size says; the caller checks the digest of what
// it read. Close stops the fetches.
func Open(ctx context.Context, s jetstream.Stream, n protocol.Names, digest string, size uint64) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(copyChunks(ctx, s, n, digest, size, pw)) }()
	return &reader{pr, cancel}
}

type reader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *reader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

type chunk struct {
	data []byte
	err  error
}

// notFoundRetries are the waits before a message a get did not find is
// asked for again: a direct get may be answered by a replica a moment
// behind the leader.
var notFoundRetries = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}

// getLast gets the last message of subject, asking again after each of
// notFoundRetries while it is not found.
func getLast(ctx context.Context, s jetstream.Stream, subject string) (*jetstream.RawStreamMsg, error) {
	for i := 0; ; i++ {
		gctx, cancel := context.WithTimeout(ctx, getTimeout)
		msg, err := s.GetLastMsgForSubject(gctx, subject)
		cancel()
		if !errors.Is(err, jetstream.ErrMsgNotFound) || i == len(notFoundRetries) {
			return msg, err
		}
		select {
		case <-time.After(notFoundRetries[i]):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// copyChunks writes the archive's chunks to w in order, each fetched by
// its own get, up to window of them at once.
func copyChunks(ctx context.Context, s jetstream.Stream, n protocol.Names, digest string, size uint64, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the fetches on an error
	total := protocol.WorkspaceChunks(size)
	pending := make(chan chan chunk, window)
	go func() {
		defer close(pending)
		for i := range total {
			c := make(chan chunk, 1)
			select {
			case pending <- c:
			case <-ctx.Done():
				return
			}
			go func() {
				msg, err := getLast(ctx, s, n.WorkspaceChunkSubject(digest, i))
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					err = fmt.Errorf("%w: chunk %d of %d is not stored: the upload did not finish, or it expired", ErrBadChunk, i, total)
				} else if err != nil {
					err = fmt.Errorf("chunk %d of %d: %w", i, total, err)
				}
				if err != nil {
					c <- chunk{err: err}
					return
				}
				c <- chunk{data: msg.Data}
			}()
		}
	}()
	i := 0
	for c := range pending {
		var got chunk
		select {
		case got = <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
		if got.err != nil {
			return got.err
		}
		want := min(uint64(protocol.WorkspaceChunkBytes), size-uint64(i)*protocol.WorkspaceChunkBytes)
		if uint64(len(got.data)) != want {
			return fmt.Errorf("%w: chunk %d of %d is %d bytes, not %d: it was uploaded with other content", ErrBadChunk, i, total, len(got.data), want)
		}
		if _, err := w.Write(got.data); err != nil {
			return err
		}
		i++
	}
	if i < total {
		return ctx.Err()
	}
	return nil
}
