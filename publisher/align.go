package publisher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/leader"
	"github.com/batonhq/baton/protocol"
)

// ErrBadPosition: the chain's last message lacks what a successor needs to
// resume from it (a run subject, a Baton-Offset, a well-formed chunk header
// or status body). Anybody can publish on a run's subjects, so this is
// outside data.
var ErrBadPosition = errors.New("publisher: malformed last message on the run's chain")

// Position is where a run's chain stands: its last message.
type Position struct {
	Seq     uint64           // stream sequence; 0 when the run has no message
	Offset  int64            // Baton-Offset: journal offset just past the line (or reached, for a status)
	MsgID   string           // Nats-Msg-Id
	Subject string           //
	Kind    protocol.RunKind // events, raw or status
	// Chunk and Chunks are i and n of a chunk's "i/n", 0 and 0 unless the
	// last message is a chunk. Chunk < Chunks means the line is partly
	// published: finish it with ResumeLine (or PublishLineFrom at Chunk+1).
	Chunk, Chunks int
	// Status is the decoded body when the last message is a status.
	Status *protocol.Status
	// Epoch is the Baton-Epoch of the last message (0 if it has none): a
	// holder whose own epoch is lower has been superseded and must not
	// write on top of it.
	Epoch uint64
}

// Partial reports whether the last message is a chunk of an unfinished line.
func (p Position) Partial() bool { return p.Chunk < p.Chunks }

// Align reads the last message of runID's chain from the stream leader. A
// run with no message gives the zero Position. A last message that cannot
// be read as a position gives ErrBadPosition together with what could be
// read (at least Seq), so the caller can decide how to go on.
func Align(ctx context.Context, js jetstream.JetStream, names protocol.Names, runID string) (Position, error) {
	msg, err := leader.Get(ctx, js.Conn(), names.EventsStream(), 0, names.RunFilter(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, fmt.Errorf("publisher: align run %s: %w", runID, err)
	}
	return positionOf(names, runID, msg)
}

// positionOf reads a chain message of runID as a Position.
func positionOf(names protocol.Names, runID string, msg *jetstream.RawStreamMsg) (Position, error) {
	p := Position{Seq: msg.Sequence, Subject: msg.Subject, MsgID: msg.Header.Get(protocol.HeaderMsgID)}
	bad := func(format string, args ...any) (Position, error) {
		return p, fmt.Errorf("%w: run %s, sequence %d: %s", ErrBadPosition, runID, msg.Sequence, fmt.Sprintf(format, args...))
	}
	id, kind, ok := names.ParseRunSubject(msg.Subject)
	if !ok || id != runID {
		return bad("subject %q is not one of the run's", msg.Subject)
	}
	p.Kind = kind
	off := msg.Header.Get(protocol.HeaderOffset)
	n, err := strconv.ParseInt(off, 10, 64)
	if err != nil || n < 0 {
		return bad("%s %q is not a byte offset", protocol.HeaderOffset, off)
	}
	p.Offset = n
	if e := msg.Header.Get(protocol.HeaderEpoch); e != "" {
		if p.Epoch, err = strconv.ParseUint(e, 10, 64); err != nil {
			return bad("%s %q is not an epoch", protocol.HeaderEpoch, e)
		}
	}
	if h := msg.Header.Get(protocol.HeaderChunk); h != "" {
		i, n, err := parseChunk(h)
		if err != nil {
			return bad("%s: %v", protocol.HeaderChunk, err)
		}
		p.Chunk, p.Chunks = i, n
	}
	if kind == protocol.KindStatus {
		st, err := protocol.ParseStatus(msg.Data)
		if err != nil {
			return bad("status body: %v", err)
		}
		p.Status = &st
	}
	return p, nil
}

// parseChunk parses "i/n" with 1 <= i <= n and n >= 2.
func parseChunk(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || i < 1 || n < 2 || i > n {
		return 0, 0, fmt.Errorf("%q is not i/n with 1 <= i <= n, n >= 2", s)
	}
	return i, n, nil
}
