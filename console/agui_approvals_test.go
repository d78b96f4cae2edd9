package console_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// TestAGUIApprovals: @ag-ui/client's HttpAgent against the console, on a
// session of an agent whose profile has a policy
// (testdata/agui-clients/clients.mjs approvals): a command the policy
// allows runs in the turn; one it asks about ends the turn with the
// interrupt outcome (the agent's pendingInterrupts), and the next run's
// resume answers it, allowed, then one cancelled (denied); the agent
// goes on in that run. Answering the first again is a RUN_ERROR 409.
// The approvals' records say who decided each, and every event of the
// run parses with @ag-ui/core's EventSchema.
func TestAGUIApprovals(t *testing.T) {
	dir, node := testenv.NPMInstall(t, filepath.Join("testdata", "agui-clients"), "BATON_AGUI_CLIENTS_NPM_DIR", "clients.mjs")
	e := setup(t)
	cfg := config.Default()
	cfg.Profiles["chat-policy"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: 2 * time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session:    &config.Session{PauseAfter: time.Minute},
		Policy:     &policy.Policy{Default: policy.Deny, Allow: []string{"Bash(git status*)"}, Ask: []string{"Bash(git push*)"}},
		AskTimeout: 2 * time.Minute,
	}
	hold := cfg.Profiles["chat-policy"]
	hold.AskTimeout = time.Second
	cfg.Profiles["chat-hold"] = hold
	hold.Session = &config.Session{PauseAfter: time.Second}
	cfg.Profiles["chat-pause"] = hold
	c := e.startWorker(t, cfg)
	con, err := console.New(t.Context(), e.js, names, console.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	run := clientsRunner(t, dir, node, srv.URL)
	type interrupt struct {
		ID, Reason, Message, ToolCallID string
		Metadata                        map[string]string
	}
	var got struct {
		Approvals struct {
			Steps []struct {
				Said       string
				Resumed    json.RawMessage
				Interrupts []interrupt
			}
			Messages []json.RawMessage
			Again    []struct{ Type, Code, Message string }
		}
	}
	out := run("approvals", "agui-policy", "chat-policy")
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("clients.mjs printed %q: %v", out, err)
	}
	steps := got.Approvals.Steps
	if len(steps) != 5 {
		t.Fatalf("%d steps, want 5: %s", len(steps), out)
	}
	for i, want := range []int{0, 1, 0, 1, 0} {
		if len(steps[i].Interrupts) != want {
			t.Fatalf("step %d (%s%s): interrupts %+v, want %d", i, steps[i].Said, steps[i].Resumed, steps[i].Interrupts, want)
		}
	}
	push := steps[1].Interrupts[0]
	if push.Reason != protocol.ReasonApproval || push.ToolCallID == "" || push.Metadata["tool"] != "Bash" ||
		push.Metadata["target"] != "git push origin main" || push.Metadata["rule"] == "" || push.Message == "" {
		t.Errorf("the push's interrupt: %+v", push)
	}
	var all []string
	for _, m := range got.Approvals.Messages {
		all = append(all, string(m))
	}
	msgs := strings.Join(all, "\n")
	for _, s := range []string{"ran: git status", "ran: git push origin main", "denied: the person asked cancelled the request"} {
		if !strings.Contains(msgs, s) {
			t.Errorf("the conversation has no %q:\n%s", s, msgs)
		}
	}
	if again := got.Approvals.Again; len(again) != 1 || again[0].Type != "RUN_ERROR" || again[0].Code != protocol.ApprovalConflict {
		t.Errorf("answering %s again: %+v, want one RUN_ERROR 409", push.ID, again)
	}

	// The records: the policy's allow, and the person's two answers.
	rec, err := c.Session(ctxT(t), "agui-policy")
	if err != nil || rec.RunCount != 1 {
		t.Fatalf("session: %+v %v, want one run", rec, err)
	}
	runID := rec.Runs[0]
	rep, err := c.Approvals(ctxT(t), protocol.ApprovalsQuery{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var decided []string
	for _, a := range rep.Approvals {
		decided = append(decided, a.Target+" "+a.State+" by "+a.DecidedBy)
	}
	want := []string{"git status allowed by policy", "git push origin main allowed by alice", "git push --force origin main denied by alice"}
	if strings.Join(decided, "; ") != strings.Join(want, "; ") {
		t.Errorf("approvals: %q, want %q", decided, want)
	}
	testAGUIHold(t, run, "agui-hold", "chat-hold", "4000", "RUN_STARTED CUSTOM baton.approval_followup")
	hrec, err := c.Session(ctxT(t), "agui-hold")
	if err != nil || len(hrec.Runs) != 1 {
		t.Fatalf("session agui-hold: %+v %v", hrec, err)
	}
	testAGUIHold(t, run, "agui-pause", "chat-pause", "6000", "RUN_STARTED")
	prec, err := c.Session(ctxT(t), "agui-pause")
	if err != nil || len(prec.Runs) != 2 {
		t.Fatalf("session agui-pause: %+v %v, want the paused run and the follow-up's", prec, err)
	}
	held, err := c.Approvals(ctxT(t), protocol.ApprovalsQuery{RunID: hrec.Runs[0]})
	if err != nil || len(held.Approvals) == 0 || held.Approvals[0].HeldAt == nil || held.Approvals[0].State != protocol.ApprovalAllowed ||
		held.Approvals[0].DecidedBy != "alice" {
		t.Errorf("agui-hold's approvals: %+v %v, want the first held, then allowed by alice", held.Approvals, err)
	}
	var checked struct{ Events int }
	if err := json.Unmarshal(run(append([]string{"schemas", runID, hrec.Runs[0]}, prec.Runs...)...), &checked); err != nil || checked.Events < 30 {
		t.Fatalf("@ag-ui/core checked %d events (%v)", checked.Events, err)
	}
}

// testAGUIHold: the ask is held after askTimeout (1 s) while the client
// waits wait ms; its resume, an allow, is answered with the follow-up
// turn, in which the agent retries and runs the command: in the same run
// (its events begin so), or, when the run paused meanwhile, in the
// session's next run, which the follow-up starts.
func testAGUIHold(t *testing.T, run func(...string) []byte, thread, profile, wait, begins string) {
	var got struct {
		Hold struct {
			Steps []struct {
				Interrupts []struct{ ID string }
				Events     []string
			}
			Messages []json.RawMessage
		}
	}
	out := run("hold", thread, profile, wait)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("clients.mjs printed %q: %v", out, err)
	}
	steps := got.Hold.Steps
	if len(steps) != 2 || len(steps[0].Interrupts) != 1 || len(steps[1].Interrupts) != 0 {
		t.Fatalf("hold: %s", out)
	}
	if ev := strings.Join(steps[1].Events, " "); !strings.HasPrefix(ev, begins) || !strings.HasSuffix(ev, "RUN_FINISHED") {
		t.Errorf("%s: the resume's response: %s, want the follow-up's turn", thread, ev)
	}
	if !strings.Contains(string(got.Hold.Messages[len(got.Hold.Messages)-1]), "ran: git push origin dev") {
		t.Errorf("the agent did not run the command after the follow-up: %s", got.Hold.Messages)
	}
}
