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
	"github.com/batonhq/baton/internal/testenv"
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

// listApprovals asks a worker for approval records.
func listApprovals(t *testing.T, nc *nats.Conn, names protocol.Names, q protocol.ApprovalsQuery) []protocol.Approval {
	t.Helper()
	b, _ := json.Marshal(q)
	m, err := nc.Request(names.ReadApprovalsSubject(), b, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("list approvals %+v: %s %s", q, code, m.Header.Get("Nats-Service-Error"))
	}
	var rep protocol.ApprovalsReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Approvals
}

func approvalIDs(aps []protocol.Approval) []string {
	var ids []string
	for _, ap := range aps {
		ids = append(ids, ap.ID+":"+ap.State)
	}
	return ids
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
	t.Parallel()
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
	// The audit: every prompt of the run, oldest first; none pending.
	all := listApprovals(t, h.nc, h.names, protocol.ApprovalsQuery{RunID: c.id})
	if got, want := approvalIDs(all), []string{"req-1:allowed", "req-2:denied", "3:allowed", "req-4:denied", id + ":allowed"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the run's approvals %v, want %v", got, want)
	}
	if got := listApprovals(t, h.nc, h.names, protocol.ApprovalsQuery{RunID: c.id, Pending: true}); len(got) != 0 {
		t.Fatalf("pending approvals of an ended run: %v", approvalIDs(got))
	}
}

// Past askTimeout with no answer the agent is told its request awaits
// approval; a person's allow, later, is a follow-up turn, and the agent's
// retry of the same command is allowed by it, not asked again.
func TestAskOutlivesTheAgentsPatience(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	h := newHarness(t, withGuardedProfile(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := h.startChat(t, ctx)
	c.say("approve: git push")
	id := c.wait("can_use_tool")["request_id"].(string)
	h.waitStatus(c.id, protocol.StatusWaiting)
	if got := approvalIDs(listApprovals(t, h.nc, h.names, protocol.ApprovalsQuery{Pending: true})); fmt.Sprint(got) != fmt.Sprint([]string{id + ":pending"}) {
		t.Fatalf("pending approvals across runs: %v, want %s", got, id)
	}
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

// A session's run that pauses while a request is held waits at no cost:
// a person's allow, later, starts the session's next run with the
// follow-up turn, and the agent's retry there is allowed by it.
func TestHeldAskPausesTheSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withConfig(func(c *config.Config) {
		p := guardedPolicy
		c.Profiles["guarded-session"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: 2 * time.Minute,
			Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
			Policy: &p, AskTimeout: time.Second, Session: &config.Session{PauseAfter: time.Second}}
	}))
	first := newRunID(t)
	h.submitSession(map[string]any{"runId": first, "profile": "guarded-session", "session": "sa",
		"input": string(client.StreamJSONUserMessage("approve: git push --tags")) + "\n"})
	if st := h.terminal(first); st.Status != protocol.StatusPaused {
		t.Fatalf("the run holding a request ended %+v, want paused", st)
	}
	if ap := h.approval(first, "req-1"); ap.State != protocol.ApprovalPending || ap.HeldAt == nil {
		t.Fatalf("approval of the paused run %+v, want pending and held", ap)
	}
	if ap, code := approve(t, h.nc, h.names, first, "req-1", true, "ana"); code != "" || ap.State != protocol.ApprovalAllowed {
		t.Fatalf("approve the paused run's request: %+v %q", ap, code)
	}
	var next string
	testenv.WaitFor(t, 30*time.Second, "the session's next run", func() bool {
		runs := h.session("sa").Runs
		next = runs[len(runs)-1]
		return next != first
	})
	if st := h.terminal(next); st.Status != protocol.StatusPaused {
		t.Fatalf("the follow-up's run ended %+v, want paused after its turn", st)
	}
	if in := h.record(next).Input; !strings.Contains(in, "was approved by ana. Please retry it now.") {
		t.Fatalf("the session's next run started with %q, want the follow-up", in)
	}
	if out := h.journalText(next); !strings.Contains(out, "ran: git push --tags") {
		t.Fatalf("the follow-up's run's journal:\n%s", out)
	}
	if ap := h.approval(next, "req-1"); ap.Rule != "approved: req-1" || ap.DecidedBy != "ana" {
		t.Fatalf("the retry's approval %+v, want allowed by ana's approval in the earlier run", ap)
	}
	if _, code := approve(t, h.nc, h.names, first, "req-1", true, "bo"); !strings.HasPrefix(code, protocol.ApprovalConflict) {
		t.Fatalf("a second answer: %q, want 409", code)
	}
}

// A hostile agent's prompts: a request id printed again is a prompt of its
// own (the first one's allow does not answer the second), and a prompt
// too large to keep whole in its record (a Write of 2 MB) is still
// decided and answered: denied, as its allow (which carries the input
// back) would be an input over maxInputBytes.
func TestPromptsOfAHostileAgent(t *testing.T) {
	t.Parallel()
	const script = `prompt() { printf '{"type":"control_request","request_id":"dup","request":{"subtype":"can_use_tool","tool_name":"%s","input":%s}}\n' "$1" "$2"; }
prompt Bash '{"command":"git status"}'
read -r a
prompt Bash '{"command":"curl https://example.com"}'
read -r b
big=$(head -c 2000000 /dev/zero | tr '\0' a)
prompt Write "{\"file_path\":\"/workspace/notes/big.txt\",\"content\":\"$big\"}"
read -r c
echo '{"type":"done"}'
`
	h := newHarness(t, withConfig(func(c *config.Config) {
		p := sessionAgent(t, script, nil)
		pol := guardedPolicy
		p.Stdin, p.Policy = config.StdinStream, &pol
		c.Profiles["hostile"] = p
	}))
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "hostile"})
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded {
		t.Fatalf("run ended %+v", st)
	}
	all := listApprovals(t, h.nc, h.names, protocol.ApprovalsQuery{RunID: id})
	if len(all) != 3 {
		t.Fatalf("approvals %v, want 3: one per prompt", approvalIDs(all))
	}
	got := map[string]string{}
	for _, ap := range all {
		got[ap.Target] = ap.ID + " " + ap.State + " " + ap.Rule
		if ap.AnswerSeq == 0 {
			t.Errorf("approval %+v was not answered", ap)
		}
	}
	if g := got["git status"]; g != "dup allowed allow: Bash(git status*)" {
		t.Errorf("the first prompt's approval: %q", g)
	}
	if g := got["curl https://example.com"]; !strings.HasPrefix(g, "r") || !strings.HasSuffix(g, " denied deny: Bash(curl *)") {
		t.Errorf("the prompt that printed its id again: %q, want an id of its own, denied", g)
	}
	if g := got["/workspace/notes/big.txt"]; !strings.HasSuffix(g, " denied deny: answer over maxInputBytes") {
		t.Errorf("the large prompt: %q", g)
	}
	for _, ap := range all {
		if ap.Tool == "Write" && (!ap.Truncated || ap.Input != nil) {
			t.Errorf("the large prompt's record keeps its input: truncated %v, %d bytes", ap.Truncated, len(ap.Input))
		}
	}
	// The second answer is a denial, for the agent's own (repeated) id.
	out := h.journalText(id)
	if strings.Count(out, `"headers":{"Baton-Approval"`) != 3 {
		t.Errorf("the journal holds %d answers of baton's, want 3:\n%.2000s", strings.Count(out, `"headers":{"Baton-Approval"`), out)
	}
}
