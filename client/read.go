package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// The client's reads go through the workers' read relay (protocol/read.go):
// a request on a relay subject with a fresh inbox of the connection as its
// reply, answered there by the server's direct get: the stored messages,
// then a "204 EOB" or "404" status.

// ErrRelay means the read relay did not answer as it should: no worker, a
// refusal, or a message that is not part of a page.
var ErrRelay = errors.New("client: read relay")

// DefaultReadTimeout bounds the wait for each message of a relay page.
const DefaultReadTimeout = 10 * time.Second

// errRelaySilent: no message of a page came within DefaultReadTimeout.
var errRelaySilent = errors.New("no answer")

// relayAbsent reports whether err says no worker answered (none running,
// or all restarting), as opposed to a refusal or a broken answer.
func relayAbsent(err error) bool {
	return errors.Is(err, ErrNoWorker)
}

// noWorkerError is a relay request that no worker answered: an ErrRelay
// that is also ErrNoWorker.
type noWorkerError struct{ error }

func (e noWorkerError) Unwrap() error      { return e.error }
func (noWorkerError) Is(target error) bool { return target == ErrNoWorker }

// Direct get answer headers (nats-server's JSApiMsgGet* reply).
const (
	hdrStream     = "Nats-Stream"
	hdrSubject    = "Nats-Subject"
	hdrSequence   = "Nats-Sequence"
	hdrTimeStamp  = "Nats-Time-Stamp"
	hdrNumPending = "Nats-Num-Pending"
)

// stored is one stored message a relay page delivered.
type stored struct {
	stream, subject string
	seq             uint64
	time            time.Time
	header          nats.Header
	data            []byte
}

// storedOf reads the direct get headers of m; ok is false when m is not a
// stored message of a stream (no or a bad Nats-Sequence).
func storedOf(m *nats.Msg) (stored, bool) {
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil || seq == 0 || m.Header.Get(hdrSubject) == "" {
		return stored{}, false
	}
	ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
	return stored{stream: m.Header.Get(hdrStream), subject: m.Header.Get(hdrSubject), seq: seq, time: ts,
		header: m.Header, data: m.Data}, true
}

// page sends one relay request and hands each stored message of its answer
// to fn, in stream order. It returns how many matching messages are stored
// past the page (the EOB's Nats-Num-Pending): 0 when the page reached the
// end, or when nothing matched (404). A single get (the status, run and
// object endpoints) is answered by one message and no EOB.
func (c *Client) page(ctx context.Context, subject string, req protocol.ReadRequest, single bool, fn func(stored) error) (pending uint64, err error) {
	nc := c.js.Conn()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrRelay, subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: body}); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrRelay, subject, err)
	}
	// Each message must come within DefaultReadTimeout of the one before:
	// one timer, pushed back per message, ends the page's context.
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(DefaultReadTimeout, func() { cancel(errRelaySilent) })
	defer timer.Stop()
	for {
		m, err := sub.NextMsgWithContext(pctx)
		timer.Reset(DefaultReadTimeout)
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case errors.Is(err, nats.ErrNoResponders):
			return 0, noWorkerError{fmt.Errorf("%w: nobody listens on %s (is a `baton worker` running?): %w", ErrRelay, subject, err)}
		case errors.Is(context.Cause(pctx), errRelaySilent):
			return 0, noWorkerError{fmt.Errorf("%w: %w on %s within %v (is a `baton worker` running?)", ErrRelay, errRelaySilent, subject, DefaultReadTimeout)}
		case err != nil:
			return 0, fmt.Errorf("%w: %s: %w", ErrRelay, subject, err)
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			return 0, fmt.Errorf("%w: %s refused (%s): %s", ErrRelay, subject, code, m.Header.Get(micro.ErrorHeader))
		}
		if len(m.Data) == 0 {
			switch st := m.Header.Get("Status"); st {
			case "204": // EOB
				n, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
				return n, nil
			case "404":
				return 0, nil
			case "":
			default:
				return 0, fmt.Errorf("%w: %s: status %s %s", ErrRelay, subject, st, m.Header.Get("Description"))
			}
		}
		s, ok := storedOf(m)
		if !ok {
			return 0, fmt.Errorf("%w: %s: answer without a stream sequence", ErrRelay, subject)
		}
		if err := fn(s); err != nil {
			return 0, err
		}
		if single {
			return 0, nil
		}
	}
}

// get reads the one message a single-message relay endpoint answers with;
// ok is false when there is none.
func (c *Client) get(ctx context.Context, subject string, name string) (m stored, ok bool, err error) {
	_, err = c.page(ctx, subject, protocol.ReadRequest{Name: name}, true, func(s stored) error {
		m, ok = s, true
		return nil
	})
	return m, ok, err
}

// pages reads every page of subject from sequence from on, handing each
// stored message to fn.
func (c *Client) pages(ctx context.Context, subject string, from uint64, name string, fn func(stored) error) error {
	for {
		last := from - 1
		pending, err := c.page(ctx, subject, protocol.ReadRequest{From: from, Max: protocol.MaxReadMax, Name: name}, false, func(s stored) error {
			last = s.seq
			return fn(s)
		})
		if err != nil || pending == 0 {
			return err
		}
		if last < from {
			return fmt.Errorf("%w: %s: a page from %d with %d pending held nothing", ErrRelay, subject, from, pending)
		}
		from = last + 1
	}
}

// isDeleted reports whether a KV or object message marks its key gone.
func isDeleted(h nats.Header) bool {
	op := h.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}
