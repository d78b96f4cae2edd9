package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The intake makes its own pull requests rather than use
// jetstream.Consumer.Fetch, because it must know when a request is gone:
// Fetch's batch ends before its subscription does, so a worker that had
// stopped fetching could still be handed the next job (above all the
// attach jobs of the runs it hands off) into a request nobody reads, where
// it waited out AckWait (TestStoppedIntakeLeavesJobsToOthers, 1 in 20
// under load).

// pullSettle bounds the drain of a pull request's subscription at stop: a
// round trip to the server, unless the connection is down.
const pullSettle = 2 * time.Second

// errPullStatus: the server ended a pull request with a status other than
// "no messages" or "request timeout" (a consumer deleted, a leadership
// change, too many waiting requests, no such consumer).
var errPullStatus = errors.New("consumer: pull request refused")

// pullStatus classifies a message that came back on a pull request's
// inbox: a job (job true), the request's normal end without one (404 no
// messages, 408 request timeout: done true), a heartbeat or flow control
// (100: neither), or its end by an error.
func pullStatus(m *nats.Msg) (job, done bool, err error) {
	status := ""
	if len(m.Data) == 0 && m.Header != nil {
		status = m.Header.Get("Status")
	}
	switch status {
	case "":
		return true, false, nil
	case "100":
		return false, false, nil
	case "404", "408":
		return false, true, nil
	case "503":
		return false, true, fmt.Errorf("%w: %w", errPullStatus, nats.ErrNoResponders)
	}
	d := m.Header.Get("Description")
	if strings.Contains(strings.ToLower(d), "consumer deleted") {
		return false, true, fmt.Errorf("%w: %s %s: %w", errPullStatus, status, d, jetstream.ErrConsumerDeleted)
	}
	return false, true, fmt.Errorf("%w: %s %s", errPullStatus, status, d)
}

// pullOne asks the consumer durable for one job and waits for it at most
// wait (0: only a job already waiting); nil, nil when none came. When ctx ends first the request's
// subscription is drained before pullOne returns, so the server holds no
// request of this intake any more, and a job that reached it meanwhile is
// given back (Nak) at once. A reconnection ends the wait the same way: the
// request was made to a server that may not hold it any more (one that
// restarted), and the caller's next request reaches the server now
// connected, so an idle intake can wait long (one request a fetch wait)
// without leaving jobs unpulled after an outage.
func (in *Intake) pullOne(ctx context.Context, durable string, wait time.Duration) (jetstream.Msg, error) {
	nc := in.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	req, _ := json.Marshal(struct {
		Batch   int           `json:"batch"`
		Expires time.Duration `json:"expires,omitempty"`
		NoWait  bool          `json:"no_wait,omitempty"`
	}{1, wait, wait == 0})
	subject := "$JS.API.CONSUMER.MSG.NEXT." + in.names.JobsStream() + "." + durable
	if err := nc.PublishRequest(subject, inbox, req); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	// The server ends the request after wait; a little more covers a
	// server that went away with it.
	timer := time.NewTimer(wait + time.Second)
	defer timer.Stop()
	for {
		select {
		case m := <-ch:
			job, done, err := pullStatus(m)
			switch {
			case job && ctx.Err() != nil:
				_ = sub.Unsubscribe()
				_ = m.Nak()
				return nil, nil
			case job:
				_ = sub.Unsubscribe() // batch 1: the request is over
				return pulledMsg{m, nc}, nil
			case done:
				_ = sub.Unsubscribe()
				return nil, err
			}
		case <-timer.C:
			in.settle(sub, ch)
			return nil, nil
		case <-reconnected:
			in.settle(sub, ch)
			return nil, nil
		case <-ctx.Done():
			in.settle(sub, ch)
			return nil, nil
		}
	}
}

// settle drains sub, a pull request's subscription that may still be
// waiting at the server, and gives back any job that reached it.
func (in *Intake) settle(sub *nats.Subscription, ch chan *nats.Msg) {
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	if err := sub.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(pullSettle):
			in.log.Warn().Str("subject", sub.Subject).Dur("waited", pullSettle).Msg("pull request not drained; dropped")
		}
	}
	_ = sub.Unsubscribe()
	for {
		select {
		case m := <-ch:
			if job, _, _ := pullStatus(m); job {
				_ = m.Nak()
			}
		default:
			return
		}
	}
}

// pulledMsg is a job from a pull request of this package, as the
// jetstream.Msg the handlers take: nats.Msg's own JetStream methods work
// on a message of any subscription.
type pulledMsg struct {
	m  *nats.Msg
	nc *nats.Conn
}

func (p pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := p.m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}, nil
}

func (p pulledMsg) Data() []byte                           { return p.m.Data }
func (p pulledMsg) Headers() nats.Header                   { return p.m.Header }
func (p pulledMsg) Subject() string                        { return p.m.Subject }
func (p pulledMsg) Reply() string                          { return p.m.Reply }
func (p pulledMsg) Ack() error                             { return p.m.Ack() }
func (p pulledMsg) Nak() error                             { return p.m.Nak() }
func (p pulledMsg) NakWithDelay(delay time.Duration) error { return p.m.NakWithDelay(delay) }
func (p pulledMsg) InProgress() error                      { return p.m.InProgress() }
func (p pulledMsg) Term() error                            { return p.m.Term() }

// doubleAckWait bounds a DoubleAck whose context has no deadline, as
// jetstream's own is (its default API timeout).
const doubleAckWait = 5 * time.Second

// DoubleAck acknowledges and waits for the server to confirm it.
func (p pulledMsg) DoubleAck(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, doubleAckWait)
		defer cancel()
	}
	return p.m.AckSync(nats.Context(ctx))
}

// TermWithReason is Term with the reason the server puts in its advisory.
func (p pulledMsg) TermWithReason(reason string) error {
	if p.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	return p.nc.Publish(p.m.Reply, []byte("+TERM "+reason))
}
