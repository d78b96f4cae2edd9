package client_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestQueue reads the queue view from a stand-in for the workers' queue
// endpoint (which is tested in package worker): the options make the
// request, a refusal and no worker are errors saying so, and a bad key
// or limit is refused before anything is sent.
func TestQueue(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	if _, err := e.c.Queue(ctx); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("no worker: %v", err)
	}
	sample := testenv.SampleQueue(time.Now().UTC().Truncate(time.Second))
	standIn := testenv.StandInForWorkersQueue(t, e.js.Conn(), names, sample)
	v, err := e.c.Queue(ctx)
	if err != nil || !reflect.DeepEqual(v, sample) {
		t.Fatalf("Queue: %+v, %v; want %+v", v, err, sample)
	}
	v, err = e.c.Queue(ctx, client.WithQueueKey("acme"), client.WithQueueLimit(1))
	if err != nil || len(v.Keys) != 1 || v.Keys[0].Key != "acme" || v.Keys[0].Waiting != 4 || len(v.Keys[0].Jobs) != 1 {
		t.Fatalf("Queue(acme, 1): %+v, %v", v, err)
	}
	// A key nothing waits or runs on: no keys, an empty list (not null).
	v, err = e.c.Queue(ctx, client.WithQueueKey("hooli"))
	if err != nil || v.Keys == nil || len(v.Keys) != 0 || v.Workers != 3 {
		t.Fatalf("Queue(hooli): %+v, %v", v, err)
	}
	want := []protocol.QueueRequest{{Limit: 10}, {Key: "acme", Limit: 1}, {Key: "hooli", Limit: 10}}
	if got := standIn.Requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %+v, want %+v", got, want)
	}
	for _, opts := range [][]client.QueueOption{
		{client.WithQueueKey("a.b")}, {client.WithQueueKey(strings.Repeat("k", 65))},
		{client.WithQueueLimit(-1)}, {client.WithQueueLimit(protocol.MaxQueueJobs + 1)},
	} {
		if _, err := e.c.Queue(ctx, opts...); !errors.Is(err, client.ErrInvalidOption) {
			t.Errorf("a bad option: %v", err)
		}
	}
	if n := len(standIn.Requests()); n != len(want) {
		t.Fatalf("bad options sent %d requests", n-len(want))
	}
	standIn.Stop()

	// The worker's refusal, and an answer that is not a view.
	answering := func(answer func(m *nats.Msg)) (stop func()) {
		sub, err := e.js.Conn().Subscribe(names.ReadQueueSubject(), answer)
		if err != nil {
			t.Fatal(err)
		}
		return func() { _ = sub.Unsubscribe() }
	}
	stop := answering(func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorCodeHeader, protocol.QueueFailed)
		r.Header.Set(micro.ErrorHeader, "cannot read the slots")
		_ = m.RespondMsg(r)
	})
	if _, err := e.c.Queue(ctx); err == nil || err.Error() != "read the queue: refused (500): cannot read the slots" {
		t.Errorf("a refusal: %v", err)
	}
	stop()
	stop = answering(func(m *nats.Msg) { _ = m.Respond([]byte("[]")) })
	defer stop()
	if _, err := e.c.Queue(ctx); err == nil || !strings.Contains(err.Error(), "unreadable answer") {
		t.Errorf("an answer not a view: %v", err)
	}
}
