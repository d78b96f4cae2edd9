package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// chaosEchoProfile is the chaos suite's interactive profile: the agent
// answers each stdin line with "echo:<line>".
const chaosEchoProfile = "  echo:\n    command: [/bin/sh, -c, 'while read -r l; do echo \"echo:$l\"; done; echo eof']\n    stdin: stream\n    pool: 1\n"

// chaosInput sends numbered input to interactive runs all through the
// chaos, as any client would: a request per message, retried with the same
// Msg-Id until a worker says it is stored (workers die, NATS restarts).
// Every message must then reach its agent exactly once, in order.
type chaosInput struct {
	t     *testing.T
	c     *client.Client
	names protocol.Names
	ids   []string
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	sent  map[string]int // messages stored, per run
}

func startChaosInput(t *testing.T, js jetstream.JetStream, names protocol.Names, prefix string, n int) *chaosInput {
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	ci := &chaosInput{t: t, c: c, names: names, stop: make(chan struct{}), sent: map[string]int{}}
	for i := range n {
		ci.ids = append(ci.ids, fmt.Sprintf("%s-input-%d", prefix, i))
	}
	return ci
}

// submit submits the runs, through submit (which retries).
func (ci *chaosInput) submit(submit func(runID, profile string)) {
	for _, id := range ci.ids {
		submit(id, "echo")
	}
	for _, id := range ci.ids {
		ci.wg.Go(func() { ci.feed(id) })
	}
}

// send stores one message, retrying what failed for the chaos' sake; a
// message is numbered by its Msg-Id, so a retry is stored once.
func (ci *chaosInput) send(id string, data []byte, opts ...client.SendOption) error {
	return sendRetrying(ci.c, id, data, opts...)
}

// sendRetrying sends data to run id through c, retrying what failed for
// the chaos' sake (give opts a Msg-Id: a retry is then stored once).
func sendRetrying(c *client.Client, id string, data []byte, opts ...client.SendOption) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Send(ctx, id, data, opts...)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, client.ErrNoInput), errors.Is(err, client.ErrTooLarge), errors.Is(err, client.ErrTerminal):
			return err // never right here: the check fails
		case time.Now().After(deadline):
			return fmt.Errorf("not stored within 2 minutes: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (ci *chaosInput) feed(id string) {
	for n := 1; ; n++ {
		select {
		case <-ci.stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		msg := fmt.Sprintf("m%d", n)
		if err := ci.send(id, []byte(msg), client.WithMsgID(id+"-"+msg)); err != nil {
			ci.t.Errorf("run %s: send %s: %v", id, msg, err)
			return
		}
		ci.mu.Lock()
		ci.sent[id] = n
		ci.mu.Unlock()
	}
}

// finish stops sending and closes every run's stdin, so the runs end.
func (ci *chaosInput) finish() {
	close(ci.stop)
	ci.wg.Wait()
	for _, id := range ci.ids {
		if err := ci.send(id, nil, client.WithEOF(), client.WithMsgID(id+"-eof")); err != nil {
			ci.t.Errorf("run %s: end of input: %v", id, err)
		}
	}
}

// check reads each run's chain and requires every message stored, once,
// in order, both as the chain's input and as the agent's answer, and the
// run to succeed. It returns the number of messages checked.
func (ci *chaosInput) check(js jetstream.JetStream) int {
	total := 0
	for _, id := range ci.ids {
		msgs, err := e2e.ReadChain(js, ci.names, id, 3*time.Minute, nil)
		if err != nil {
			ci.t.Errorf("run %s: %v", id, err)
			continue
		}
		var inputs, echoes []string
		var last protocol.Status
		for _, m := range msgs {
			switch {
			case strings.HasSuffix(m.Subject(), ".input"):
				inputs = append(inputs, strings.TrimSuffix(string(m.Data()), "\n"))
			case strings.HasSuffix(m.Subject(), ".raw"):
				echoes = append(echoes, string(m.Data()))
			case strings.HasSuffix(m.Subject(), ".status"):
				_ = json.Unmarshal(m.Data(), &last)
			}
		}
		ci.mu.Lock()
		n := ci.sent[id]
		ci.mu.Unlock()
		var wantIn, wantEcho []string
		for i := 1; i <= n; i++ {
			wantIn = append(wantIn, fmt.Sprintf("m%d", i))
			wantEcho = append(wantEcho, fmt.Sprintf("echo:m%d", i))
		}
		wantIn = append(wantIn, "") // the end of input, empty
		wantEcho = append(wantEcho, "eof")
		if strings.Join(inputs, ",") != strings.Join(wantIn, ",") {
			ci.t.Errorf("run %s: the chain's inputs are %v, want m1..m%d once each, in order, then the end of input", id, inputs, n)
		}
		if strings.Join(echoes, ",") != strings.Join(wantEcho, ",") {
			ci.t.Errorf("run %s: the agent answered %v, want echo:m1..echo:m%d once each, in order, then eof", id, echoes, n)
		}
		if last.Status != protocol.StatusSucceeded {
			ci.t.Errorf("run %s ended %+v, want succeeded", id, last)
		}
		total += n
	}
	return total
}
