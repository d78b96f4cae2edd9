package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// guardedPolicy is the policy of the approval tests' profiles.
var guardedPolicy = policy.Policy{
	Default: policy.Ask,
	Allow:   []string{"Bash(git status*)", "Write(/workspace/notes/*)"},
	Ask:     []string{"Bash(git push*)"},
	Deny:    []string{"Bash(curl *)", "Write(/workspace/.github/*)"},
}

func withGuardedProfile(askTimeout time.Duration) harnessOption {
	return withConfig(func(c *config.Config) {
		p := guardedPolicy
		c.Profiles["guarded"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: 2 * time.Minute,
			Stdin: config.StdinStream, Policy: &p, AskTimeout: askTimeout}
	})
}

// approve answers approval id of runID as a client would, returning the
// decided record, or the refusal's error code.
func approve(t *testing.T, nc *nats.Conn, names protocol.Names, runID, id string, allow bool, by string) (protocol.Approval, string) {
	t.Helper()
	b, _ := json.Marshal(protocol.ApproveRequest{ID: id, Allow: allow, By: by, Message: "not now"})
	m, err := nc.Request(names.ApproveSubject(runID), b, 10*time.Second)
	if err != nil {
		t.Fatalf("approve %s/%s: %v", runID, id, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return protocol.Approval{}, code + " " + m.Header.Get("Nats-Service-Error")
	}
	var ap protocol.Approval
	if err := json.Unmarshal(m.Data, &ap); err != nil {
		t.Fatal(err)
	}
	return ap, ""
}

// chat drives one conversation run of the guarded profile.
type chat struct {
	t      *testing.T
	h      *harness
	c      *client.Client
	id     string
	ctx    context.Context
	events <-chan map[string]any
}

func (h *harness) startChat(t *testing.T, ctx context.Context) *chat {
	t.Helper()
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "guarded"})
	h.waitStatus(id, protocol.StatusStarted)
	return &chat{t: t, h: h, c: c, id: id, ctx: ctx, events: h.follow(ctx, id)}
}

func (c *chat) say(text string) {
	c.t.Helper()
	if _, err := c.c.Send(c.ctx, c.id, client.StreamJSONUserMessage(text)); err != nil {
		c.t.Fatal(err)
	}
}

// wait returns the next event whose text holds what.
func (c *chat) wait(what string) map[string]any {
	c.t.Helper()
	for {
		select {
		case ev := <-c.events:
			if strings.Contains(fmt.Sprint(ev), what) {
				return ev
			}
		case <-c.ctx.Done():
			c.t.Fatalf("run %s: no event with %q", c.id, what)
		}
	}
}

// record reads approval id of the run.
func (h *harness) approval(runID, id string) protocol.Approval {
	h.t.Helper()
	s, err := kv.Open[protocol.Approval](h.t.Context(), h.js, h.names.ApprovalsBucket())
	if err != nil {
		h.t.Fatal(err)
	}
	ap, _, err := s.Get(h.t.Context(), protocol.ApprovalKey(runID, id))
	if err != nil {
		h.t.Fatalf("approval %s of %s: %v", id, runID, err)
	}
	return ap
}

// decisions counts the chain's inputs of baton's own, by approval id and
// kind ("decision by policy", "decision by timeout", "followup by ana").
func decisions(msgs []jetstream.Msg) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, m := range msgs {
		h := m.Headers()
		id := h.Get(protocol.HeaderApproval)
		if id == "" || !strings.HasSuffix(m.Subject(), ".input") {
			continue
		}
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][h.Get(protocol.HeaderInputKind)+" by "+h.Get(protocol.HeaderDecidedBy)]++
	}
	return out
}

// The policy answers what it decides, once, as an input of kind decision
// saying which rule; a prompt it asks about waits for a person (status
// waiting, reason approval), and a second answer is refused; each prompt's
// chain message says its verdict and rule.
func TestPolicyDecidesAndAsks(t *testing.T) {
	h := newHarness(t, withGuardedProfile(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := h.startChat(t, ctx)
	notices := make(chan *nats.Msg, 64)
	sub, err := h.nc.ChanSubscribe(h.names.ApprovalNoticeSubject(c.id), notices)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	c.say("approve: git status --short")
	c.wait("result:ran: git status --short")
	c.say("approve: curl https://example.com")
	c.wait("denied: Denied by baton's policy (deny: Bash(curl *))")
	c.say("codex: git status")
	c.wait("result:ran: git status")
	c.say("write: /workspace/.github/workflows/x.yml")
	c.wait("denied: Denied by baton's policy (deny: Write(/workspace/.github/*))")

	c.say("approve: git push origin main")
	prompt := c.wait("can_use_tool")
	id := prompt["request_id"].(string)
	st := h.waitStatus(c.id, protocol.StatusWaiting)
	if st.Reason != protocol.ReasonApproval {
		t.Fatalf("waiting status %+v, want reason %q", st, protocol.ReasonApproval)
	}
	for asked := false; !asked; {
		select {
		case m := <-notices:
			var ap protocol.Approval
			if err := json.Unmarshal(m.Data, &ap); err != nil {
				t.Fatalf("notice %s: %v", m.Data, err)
			}
			asked = ap.ID == id && ap.State == protocol.ApprovalPending && ap.Rule == "ask: Bash(git push*)"
		case <-ctx.Done():
			t.Fatalf("no notice of approval %s pending", id)
		}
	}
	if ap, code := approve(t, h.nc, h.names, c.id, id, true, "ana"); code != "" || ap.State != protocol.ApprovalAllowed || ap.DecidedBy != "ana" {
		t.Fatalf("approve: %+v %q", ap, code)
	}
	c.wait("result:ran: git push origin main")
	if _, code := approve(t, h.nc, h.names, c.id, id, false, "bo"); !strings.HasPrefix(code, protocol.ApprovalConflict+" ") || !strings.Contains(code, "allowed by ana") {
		t.Fatalf("second answer: %q, want 409 saying ana allowed it", code)
	}
	if _, code := approve(t, h.nc, h.names, c.id, "nosuch", true, ""); !strings.HasPrefix(code, protocol.ApprovalNotFound) {
		t.Fatalf("unknown approval: %q, want 404", code)
	}
	h.waitStatus(c.id, protocol.StatusRunning)
	if _, err := c.c.Send(ctx, c.id, nil, client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	msgs := h.chain(c.id, time.Minute)
	h.assertChainMatchesJournal(c.id, msgs)
	got := decisions(msgs)
	want := map[string]map[string]int{
		"req-1": {"decision by policy": 1}, "req-2": {"decision by policy": 1}, "3": {"decision by policy": 1},
		"req-4": {"decision by policy": 1}, id: {"decision by ana": 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("baton's inputs by approval: %v, want %v", got, want)
	}
	verdicts := map[string]string{}
	for _, m := range msgs {
		if a := m.Headers().Get(protocol.HeaderApproval); a != "" && strings.HasSuffix(m.Subject(), ".events") {
			verdicts[a] = m.Headers().Get(protocol.HeaderVerdict) + " " + m.Headers().Get(protocol.HeaderRule)
		}
	}
	wantVerdicts := map[string]string{"req-1": "allow allow: Bash(git status*)", "req-2": "deny deny: Bash(curl *)",
		"3": "allow allow: Bash(git status*)", "req-4": "deny deny: Write(/workspace/.github/*)", id: "ask ask: Bash(git push*)"}
	if fmt.Sprint(verdicts) != fmt.Sprint(wantVerdicts) {
		t.Fatalf("prompts' verdicts on the chain: %v, want %v", verdicts, wantVerdicts)
	}
	if ap := h.approval(c.id, id); ap.AnswerSeq == 0 || ap.Rule != "ask: Bash(git push*)" || ap.DecidedAt == nil {
		t.Fatalf("record %+v: want the answer's input sequence, the rule and when", ap)
	}
}

// Past askTimeout with no answer the agent is told its request awaits
// approval; a person's allow, later, is a follow-up turn, and the agent's
// retry of the same command is allowed by it, not asked again.
func TestAskOutlivesTheAgentsPatience(t *testing.T) {
	h := newHarness(t, withGuardedProfile(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := h.startChat(t, ctx)
	c.say("approve: git push --force")
	id := c.wait("can_use_tool")["request_id"].(string)
	c.wait("awaits a person's approval")
	c.wait("result:denied: git push --force")
	if ap := h.approval(c.id, id); ap.State != protocol.ApprovalPending || ap.HeldAt == nil || ap.HoldSeq == 0 {
		t.Fatalf("held approval %+v, want pending, held, its hold's sequence", ap)
	}
	// A person answers well after the agent gave up waiting.
	if ap, code := approve(t, h.nc, h.names, c.id, id, true, "ana"); code != "" || ap.State != protocol.ApprovalAllowed {
		t.Fatalf("approve: %+v %q", ap, code)
	}
	retry := c.wait("can_use_tool")
	c.wait("result:ran: git push --force")
	if _, err := c.c.Send(ctx, c.id, nil, client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	msgs := h.chain(c.id, time.Minute)
	h.assertChainMatchesJournal(c.id, msgs)
	rid := retry["request_id"].(string)
	got := decisions(msgs)
	want := map[string]map[string]int{
		id:  {"decision by timeout": 1, "followup by ana": 1},
		rid: {"decision by ana": 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("baton's inputs by approval: %v, want %v", got, want)
	}
	if ap := h.approval(c.id, rid); ap.Rule != "approved: "+id || ap.DecidedBy != "ana" {
		t.Fatalf("the retry's record %+v: want it allowed by ana's approval %s", ap, id)
	}
}

// An ask pending while its worker hands the run off (SIGTERM) is answered
// through the successor, once.
func TestAskSurvivesHandOff(t *testing.T) {
	h := newHarness(t, withGuardedProfile(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := h.startChat(t, ctx)
	c.say("approve: git push")
	id := c.wait("can_use_tool")["request_id"].(string)
	h.waitStatus(c.id, protocol.StatusWaiting)
	h.addWorker("w2")
	h.stopWorker("w1")
	if ap, code := approve(t, h.nc, h.names, c.id, id, true, "ana"); code != "" || ap.State != protocol.ApprovalAllowed {
		t.Fatalf("approve after the hand-off: %+v %q", ap, code)
	}
	c.wait("result:ran: git push")
	if _, err := c.c.Send(ctx, c.id, nil, client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	msgs := h.chain(c.id, time.Minute)
	h.assertChainMatchesJournal(c.id, msgs)
	if got, want := decisions(msgs), map[string]map[string]int{id: {"decision by ana": 1}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("baton's inputs by approval: %v, want %v", got, want)
	}
}
