package testenv

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// QueueStandIn answers protocol.ReadQueueSubject IN PLACE OF THE WORKERS'
// queue endpoint, which is tested in package worker: it is for the tests
// of what reads the queue (client.Queue, `baton queue`, `baton runs list
// --waiting`, the console's /api/queue). It decodes each request as the
// contract says (protocol.DecodeQueueRequest), refuses a bad one with
// protocol.QueueBad, and answers a good one with the fixed view cut to
// the request (QueueFor).
type QueueStandIn struct {
	mu   sync.Mutex
	view protocol.QueueView
	reqs []protocol.QueueRequest
	sub  *nats.Subscription
}

// StandInForWorkersQueue subscribes a QueueStandIn answering view on nc
// until the test ends.
func StandInForWorkersQueue(t testing.TB, nc *nats.Conn, names protocol.Names, view protocol.QueueView) *QueueStandIn {
	t.Helper()
	q := &QueueStandIn{view: view}
	sub, err := nc.Subscribe(names.ReadQueueSubject(), func(m *nats.Msg) {
		r, err := protocol.DecodeQueueRequest(m.Data)
		if err != nil {
			reply := nats.NewMsg(m.Reply)
			reply.Header.Set(micro.ErrorCodeHeader, protocol.QueueBad)
			reply.Header.Set(micro.ErrorHeader, err.Error())
			_ = m.RespondMsg(reply)
			return
		}
		q.mu.Lock()
		q.reqs = append(q.reqs, r)
		v := QueueFor(q.view, r)
		q.mu.Unlock()
		b, _ := json.Marshal(v)
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	q.sub = sub
	t.Cleanup(q.Stop)
	return q
}

// Set changes the view answered from now on.
func (q *QueueStandIn) Set(v protocol.QueueView) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.view = v
}

// Requests are the good requests answered so far, decoded (Limit filled).
func (q *QueueStandIn) Requests() []protocol.QueueRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]protocol.QueueRequest(nil), q.reqs...)
}

// Stop unsubscribes: nobody answers the queue request any more.
func (q *QueueStandIn) Stop() { _ = q.sub.Unsubscribe() }

// QueueFor is v as a request r sees it: only r.Key's key when r names one,
// at most r.Limit jobs listed per key (Waiting still counts them all).
func QueueFor(v protocol.QueueView, r protocol.QueueRequest) protocol.QueueView {
	out := protocol.QueueView{Keys: []protocol.KeyQueue{}, FreeSlots: v.FreeSlots, Workers: v.Workers}
	for _, k := range v.Keys {
		if r.Key != "" && k.Key != r.Key {
			continue
		}
		if r.Limit > 0 && len(k.Jobs) > r.Limit {
			k.Jobs = k.Jobs[:r.Limit]
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// SampleQueue is a queue view of four keys as of now, for the tests of
// what shows it: every wait reason, an unlimited key, a key with more
// waiting than it lists, and a key running with nothing waiting.
func SampleQueue(now time.Time) protocol.QueueView {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	return protocol.QueueView{FreeSlots: 1, Workers: 3, Keys: []protocol.KeyQueue{
		{Key: "acme", Running: 2, Limit: 2, Weight: 3, Waiting: 4, Jobs: []protocol.QueuedJob{
			{RunID: "run-acme-7", Profile: "claude", Priority: 5, Position: 1, Since: ago(3*time.Minute + 5*time.Second), Reason: protocol.WaitKeyLimit},
			{RunID: "run-acme-5", Profile: "claude", Priority: 3, Position: 2, Since: ago(42 * time.Second), Reason: protocol.WaitBehind},
			{RunID: "run-acme-6", Profile: "codex", Priority: 3, Position: 3, Since: ago(2*time.Hour + 3*time.Minute), Reason: protocol.WaitBehind},
		}},
		{Key: "globex", Running: 0, Limit: 0, Weight: 1, Waiting: 1, Jobs: []protocol.QueuedJob{
			{RunID: "run-globex-1", Profile: "codex", Priority: 1, Position: 1, Since: ago(50 * time.Hour), Reason: protocol.WaitProfileLimit},
		}},
		{Key: "umbrella", Running: 0, Limit: 1, Weight: 2, Waiting: 1, Jobs: []protocol.QueuedJob{
			{RunID: "run-umbrella-1", Profile: "demo", Priority: 3, Position: 1, Since: ago(9 * time.Second), Reason: protocol.WaitNoWorker},
		}},
		{Key: "initech", Running: 1, Limit: 4, Weight: 1, Waiting: 0, Jobs: []protocol.QueuedJob{}},
	}}
}
