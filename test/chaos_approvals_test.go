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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// chaosGuardedProfile is the chaos suite's profile with a policy: the
// fake agent's chat asks before each command; "git status" is allowed by
// the policy, anything else waits for a person. No hold: the person here
// answers within the chaos' outages.
const chaosGuardedProfile = "  guarded:\n    command: [\"{baton}\", fake-agent, --chat]\n    stdin: stream\n    askTimeout: 10m\n" +
	"    policy:\n      default: ask\n      allow: [\"Bash(git status*)\"]\n"

// chaosApprovals talks with guarded runs all through the chaos: each turn
// asks for a command, every second one a person (this test) allows by an
// approve request, retried as any client would while workers die and
// NATS restarts. Each prompt must be answered exactly once, and each
// command run once.
type chaosApprovals struct {
	t     *testing.T
	c     *client.Client
	nc    *nats.Conn
	js    jetstream.JetStream
	names protocol.Names
	ids   []string
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	turns map[string]int // turns answered, per run
}

func startChaosApprovals(t *testing.T, nc *nats.Conn, js jetstream.JetStream, names protocol.Names, prefix string, n int) *chaosApprovals {
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	ca := &chaosApprovals{t: t, c: c, nc: nc, js: js, names: names, stop: make(chan struct{}), turns: map[string]int{}}
	for i := range n {
		ca.ids = append(ca.ids, fmt.Sprintf("%s-approvals-%d", prefix, i))
	}
	return ca
}

func (ca *chaosApprovals) submit(submit func(runID, profile string)) {
	for _, id := range ca.ids {
		submit(id, "guarded")
	}
	for _, id := range ca.ids {
		ca.wg.Go(func() { ca.talk(id) })
	}
}

// command is what turn n asks to run: a person is asked on even turns.
func command(n int) (cmd string, asked bool) {
	if n%2 == 0 {
		return fmt.Sprintf("deploy %d", n), true
	}
	return fmt.Sprintf("git status %d", n), false
}

// talk sends one turn at a time: the fake agent reads nothing but the
// answer while a prompt waits, so the next turn goes once the prompt's
// answer is stored.
func (ca *chaosApprovals) talk(id string) {
	for n := 1; ; n++ {
		select {
		case <-ca.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		cmd, asked := command(n)
		msg := fmt.Sprintf("t%d", n)
		if err := sendRetrying(ca.c, id, client.StreamJSONUserMessage("approve: "+cmd), client.WithMsgID(id+"-"+msg)); err != nil {
			ca.t.Errorf("run %s: send turn %d: %v", id, n, err)
			return
		}
		// The fake agent's request ids are req-<turn>.
		if asked {
			if err := ca.allow(id, fmt.Sprintf("req-%d", n)); err != nil {
				ca.t.Errorf("run %s: %v", id, err)
				return
			}
		}
		if err := ca.answered(id, fmt.Sprintf("req-%d", n)); err != nil {
			ca.t.Errorf("run %s: %v", id, err)
			return
		}
		ca.mu.Lock()
		ca.turns[id] = n
		ca.mu.Unlock()
	}
}

// allow answers approval apID of run id until a worker says it is
// decided: by this answer, or by a retry of it whose first reply was
// lost (409, decided by "chaos").
func (ca *chaosApprovals) allow(id, apID string) error {
	b, _ := json.Marshal(protocol.ApproveRequest{ID: apID, Allow: true, By: "chaos"})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := ca.nc.Request(ca.names.ApproveSubject(id), b, 5*time.Second)
		if err == nil {
			code, desc := m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error")
			switch {
			case code == "":
				return nil
			case code == protocol.ApprovalConflict && strings.Contains(desc, "allowed by chaos"):
				return nil
			case code != protocol.ApprovalNotFound && code != protocol.ApprovalFailed:
				return fmt.Errorf("approve %s: %s %s", apID, code, desc)
			}
			err = errors.New(code + " " + desc) // not recorded yet, or NATS away
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("approve %s: not decided within 2 minutes: %w", apID, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answered waits until approval apID's answer is stored for the agent.
func (ca *chaosApprovals) answered(id, apID string) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := kv.Open[protocol.Approval](ctx, ca.js, ca.names.ApprovalsBucket())
		var ap protocol.Approval
		if err == nil {
			ap, _, err = s.Get(ctx, protocol.ApprovalKey(id, apID))
		}
		cancel()
		if err == nil && ap.AnswerSeq != 0 {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("approval %s: no answer stored within 2 minutes (last read: %v)", apID, last)
}

// finish stops talking and closes every run's stdin, so the runs end.
func (ca *chaosApprovals) finish() {
	close(ca.stop)
	ca.wg.Wait()
	for _, id := range ca.ids {
		if err := sendRetrying(ca.c, id, nil, client.WithEOF(), client.WithMsgID(id+"-eof")); err != nil {
			ca.t.Errorf("run %s: end of input: %v", id, err)
		}
	}
}

// check reads each run's chain: each prompt's verdict on its line, one
// answer of baton's for it (the policy's, or the person's), one result
// per turn, in order, and the run succeeded. It returns the prompts
// checked.
func (ca *chaosApprovals) check(js jetstream.JetStream) int {
	total := 0
	for _, id := range ca.ids {
		msgs, err := e2e.ReadChain(js, ca.names, id, 3*time.Minute, nil)
		if err != nil {
			ca.t.Errorf("run %s: %v", id, err)
			continue
		}
		answers := map[string][]string{}
		verdicts := map[string]string{}
		var results []string
		var last protocol.Status
		for _, m := range msgs {
			h := m.Headers()
			switch {
			case strings.HasSuffix(m.Subject(), ".input") && h.Get(protocol.HeaderApproval) != "":
				answers[h.Get(protocol.HeaderApproval)] = append(answers[h.Get(protocol.HeaderApproval)], h.Get(protocol.HeaderDecidedBy))
			case strings.HasSuffix(m.Subject(), ".events") && h.Get(protocol.HeaderApproval) != "":
				verdicts[h.Get(protocol.HeaderApproval)] = h.Get(protocol.HeaderVerdict)
			case strings.HasSuffix(m.Subject(), ".events"):
				var ev struct{ Type, Result string }
				if json.Unmarshal(m.Data(), &ev) == nil && ev.Type == "result" {
					results = append(results, ev.Result)
				}
			case strings.HasSuffix(m.Subject(), ".status"):
				_ = json.Unmarshal(m.Data(), &last)
			}
		}
		ca.mu.Lock()
		n := ca.turns[id]
		ca.mu.Unlock()
		var wantResults []string
		for i := 1; i <= n; i++ {
			cmd, asked := command(i)
			apID := fmt.Sprintf("req-%d", i)
			wantBy, wantVerdict := protocol.DecidedByPolicy, "allow"
			if asked {
				wantBy, wantVerdict = "chaos", "ask"
			}
			if got := answers[apID]; len(got) != 1 || got[0] != wantBy {
				ca.t.Errorf("run %s: prompt %s answered by %v, want once by %s", id, apID, got, wantBy)
			}
			if verdicts[apID] != wantVerdict {
				ca.t.Errorf("run %s: prompt %s's verdict on the chain %q, want %q", id, apID, verdicts[apID], wantVerdict)
			}
			wantResults = append(wantResults, "ran: "+cmd)
		}
		if strings.Join(results, ",") != strings.Join(wantResults, ",") {
			ca.t.Errorf("run %s: the agent's results %v, want %v: each command run once, in order", id, results, wantResults)
		}
		if last.Status != protocol.StatusSucceeded {
			ca.t.Errorf("run %s ended %+v, want succeeded", id, last)
		}
		total += n
	}
	return total
}
