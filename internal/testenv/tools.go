package testenv

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// ToolService is a product's host tool service, as docs/tools.md tells one
// to write it: a NATS micro service whose endpoints are
// <prefix>.tools.<name>, the tool's description and schema in their
// metadata, which executes each idempotency key once and answers a repeat
// with the first answer. Its tools: deploy, which answers
// "deployed <args> for <runId>", and create_pr, which fails with 409.
// Mu guards the fields below it.
type ToolService struct {
	Mu       sync.Mutex
	Requests []micro.Request          // every request, repeats included
	Executed map[string]int           // executions by idempotency key
	Started  chan struct{}            // closed when the first execution starts
	answers  map[string][]byte        // by idempotency key
	running  map[string]chan struct{} // closed when the key's execution ends
	block    chan struct{}            // if set, the first execution waits for it
	once     sync.Once
}

// NewToolService serves the tools on nc until the test ends; with block
// set, the first execution waits until block is closed.
func NewToolService(t testing.TB, nc *nats.Conn, names protocol.Names, block chan struct{}) *ToolService {
	t.Helper()
	ts := &ToolService{answers: map[string][]byte{}, running: map[string]chan struct{}{}, Executed: map[string]int{},
		Started: make(chan struct{}), block: block}
	svc, err := micro.AddService(nc, micro.Config{Name: "product-tools", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	deploy := func(req micro.Request) {
		key := req.Headers().Get(protocol.HeaderIdempotencyKey)
		ts.Mu.Lock()
		ts.Requests = append(ts.Requests, req)
		if done, ok := ts.running[key]; ok {
			// A repeat: the first execution's answer, once it is done.
			ts.Mu.Unlock()
			<-done
			ts.Mu.Lock()
			a := ts.answers[key]
			ts.Mu.Unlock()
			_ = req.Respond(a)
			return
		}
		done := make(chan struct{})
		ts.running[key] = done
		ts.Executed[key]++
		ts.Mu.Unlock()
		ts.once.Do(func() {
			close(ts.Started)
			if ts.block != nil {
				<-ts.block
			}
		})
		a := []byte("deployed " + string(req.Data()) + " for " + req.Headers().Get(protocol.HeaderToolRunID))
		ts.Mu.Lock()
		ts.answers[key] = a
		close(done)
		ts.Mu.Unlock()
		_ = req.Respond(a)
	}
	for _, e := range []struct {
		name    string
		handler micro.HandlerFunc
		meta    map[string]string
	}{
		// Each request in its own goroutine: micro calls a handler one
		// request at a time, and a repeat must not wait behind the first.
		{"deploy", func(req micro.Request) { go deploy(req) }, map[string]string{protocol.ToolMetaDescription: "Deploy the workspace",
			protocol.ToolMetaSchema: `{"type":"object","properties":{"env":{"type":"string"}},"required":["env"]}`}},
		{"create_pr", func(req micro.Request) { _ = req.Error("409", "a pull request for this branch exists", nil) },
			map[string]string{protocol.ToolMetaDescription: "Open a pull request"}},
	} {
		if err := svc.AddEndpoint(e.name, e.handler, micro.WithEndpointSubject(names.ToolSubject(e.name)),
			micro.WithEndpointMetadata(e.meta)); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}
