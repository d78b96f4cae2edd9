package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestSettle: each disposition does to a real job message what it says.
// An ack is never redelivered, a nak comes back after its delay, a
// rejection is in the DLQ with its reason, and a job left comes back only
// after AckWait. Each job's second delivery is acknowledged.
func TestSettle(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		nakDelay = 700 * time.Millisecond
		ackWait  = 3 * time.Second
	)
	first := map[string]consumer.Disposition{
		"ack":    consumer.Ack("test"),
		"nak":    consumer.Nak(nakDelay, "test", nil),
		"reject": consumer.Reject(fmt.Errorf("%w: test", protocol.ErrInvalidJob)),
		"leave":  consumer.Leave("test"),
	}
	for id := range first {
		if _, err := js.Publish(ctx, names.RunJobSubject(), fmt.Appendf(nil, `{"runId":%q,"profile":"demo"}`, id)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	deliveries := map[string][]time.Time{}
	var in *consumer.Intake
	in = consumer.New(js, names, config.Default(), consumer.WithSelf("/bin/true"),
		consumer.WithFetchWait(200*time.Millisecond), consumer.WithAckWait(ackWait))
	stop := startIntake(t, ctx, in, "settle", 4, consumer.Handlers{
		Run: func(ctx context.Context, j consumer.Job) {
			mu.Lock()
			deliveries[j.Job.RunID] = append(deliveries[j.Job.RunID], time.Now())
			n := len(deliveries[j.Job.RunID])
			mu.Unlock()
			d := consumer.Ack("second delivery")
			if n == 1 {
				d = first[j.Job.RunID]
			}
			in.Settle(ctx, j.Msg, d, zerolog.Nop())
		},
		Attach: func(ctx context.Context, msg jetstream.Msg) { in.Settle(ctx, msg, consumer.Ack("test"), zerolog.Nop()) },
	})
	defer stop()
	delivered := func(id string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), deliveries[id]...)
	}
	testenv.WaitFor(t, 30*time.Second, "the nak'd and the left job delivered twice, one DLQ entry, nothing pending", func() bool {
		if len(delivered("nak")) < 2 || len(delivered("leave")) < 2 {
			return false
		}
		dlq, err := res.DLQ.Info(ctx)
		if err != nil || dlq.State.Msgs != 1 {
			return false
		}
		c, err := js.Consumer(ctx, names.JobsStream(), consumer.DurableName)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	// By now AckWait has passed since every first delivery: a lost ack
	// would have come back.
	for id, want := range map[string]int{"ack": 1, "reject": 1, "nak": 2, "leave": 2} {
		if got := len(delivered(id)); got != want {
			t.Errorf("job %s delivered %d times, want %d", id, got, want)
		}
	}
	if d := delivered("nak"); len(d) == 2 {
		if gap := d[1].Sub(d[0]); gap < nakDelay || gap >= ackWait {
			t.Errorf("nak'd job came back after %v, want its delay %v (and before AckWait %v)", gap, nakDelay, ackWait)
		}
	}
	if d := delivered("leave"); len(d) == 2 {
		// The server's AckWait starts when it sends; the times here are
		// when the test received, which a loaded machine delays unevenly
		// (a fresh-clone CI saw 2.9992 s).
		const receiptJitter = 100 * time.Millisecond
		if gap := d[1].Sub(d[0]); gap < ackWait-receiptJitter {
			t.Errorf("a job left came back after %v, want AckWait %v", gap, ackWait)
		}
	}
	m, err := res.DLQ.GetLastMsgForSubject(ctx, names.DLQSubject(protocol.ReasonInvalid))
	if err != nil {
		t.Fatalf("the rejected job's DLQ entry under reason %s: %v", protocol.ReasonInvalid, err)
	}
	if m.Header.Get(protocol.HeaderReason) != string(protocol.ReasonInvalid) {
		t.Errorf("DLQ entry headers: %v", m.Header)
	}
}
