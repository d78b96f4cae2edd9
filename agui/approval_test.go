package agui_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
)

// codexAsk is a Codex app-server command and its approval prompt, as a
// worker publishes them for a run with a policy (verdict: allow, ask or
// deny; "" for a run without one).
func codexAsk(verdict string) []string {
	prompt := `events {"method":"item/commandExecution/requestApproval","id":7,"params":{"threadId":"t","turnId":"u","itemId":"c1","command":"/bin/bash -lc 'git push origin main'","commandActions":[{"type":"unknown","command":"git push origin main"}]}}`
	if verdict != "" {
		prompt += " | Baton-Approval=7 | Baton-Verdict=" + verdict + " | Baton-Rule=" + verdict + ": Bash(git push*)"
	}
	return []string{
		status("started"),
		`events {"method":"item/started","params":{"item":{"id":"c1","type":"commandExecution","command":"git push origin main","status":"inProgress"}}}`,
		prompt,
	}
}

// TestApprovalInterrupt: a prompt the policy asks about ends the turn
// with the interrupt outcome when the turn stops at it, its tool call
// waiting for its result in the next run; a person's decision opens the
// next run, and the result comes in it.
func TestApprovalInterrupt(t *testing.T) {
	chain := append(codexAsk("ask"),
		status("waiting", `,"reason":"approval"`),
		`input {"id":7,"result":{"decision":"accept"}} | Baton-Input-Kind=decision | Baton-Input-Seq=3 | Baton-Approval=7 | Baton-Decided-By=alice`,
		status("running"),
		`events {"method":"item/completed","params":{"item":{"id":"c1","type":"commandExecution","command":"git push origin main","status":"completed","exitCode":0,"aggregatedOutput":"pushed"}}}`,
		`events {"method":"turn/completed","params":{"turn":{"status":"completed"}}}`,
		status("waiting"),
	)
	evs := project(agui.New("r"), msgs(chain...))
	got := summaries(t, evs)
	want := []string{"RUN_STARTED", "TOOL_CALL_START shell", `TOOL_CALL_ARGS {"command":"git push origin main"}`, "TOOL_CALL_END",
		"CUSTOM baton.approval", "CUSTOM baton.waiting", "RUN_FINISHED interrupt",
		"RUN_STARTED", "CUSTOM baton.approval_answer", "CUSTOM baton.running", "TOOL_CALL_RESULT pushed", "CUSTOM baton.waiting", "RUN_FINISHED success"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	var fin agui.Event
	for _, e := range evs {
		if e.Event.Type == agui.RunFinished {
			fin = e.Event
			break
		}
	}
	in := fin.Outcome.Interrupts
	if len(in) != 1 || in[0].ID != "7" || in[0].Reason != protocol.ReasonApproval || in[0].ToolCallID != evs[1].Event.ToolCallID ||
		in[0].Message != "Allow Bash: git push origin main? (ask: Bash(git push*))" || len(in[0].ResponseSchema) == 0 {
		t.Fatalf("interrupts %+v", in)
	}
	var meta map[string]string
	if err := json.Unmarshal(in[0].Metadata, &meta); err != nil ||
		!reflect.DeepEqual(meta, map[string]string{"runId": "r", "tool": "Bash", "target": "git push origin main", "rule": "ask: Bash(git push*)"}) {
		t.Fatalf("metadata %s (%v)", in[0].Metadata, err)
	}
	var ans map[string]any
	_ = json.Unmarshal(evs[8].Event.Value, &ans)
	if ans["approvalId"] != "7" || ans["decidedBy"] != "alice" || ans["decision"] != "accept" {
		t.Fatalf("answer %s", evs[8].Event.Value)
	}
}

// TestApprovalVerdicts: allow and deny by the policy, and a run without
// a policy, are no interrupts: the turn's end is a success; the prompt's
// CUSTOM says the verdict and rule when there is one.
func TestApprovalVerdicts(t *testing.T) {
	for _, verdict := range []string{"allow", "deny", ""} {
		chain := append(codexAsk(verdict), status("waiting"))
		evs := project(agui.New("r"), msgs(chain...))
		got := summaries(t, evs)
		if got[len(got)-1] != "RUN_FINISHED success" || got[len(got)-2] != "TOOL_CALL_RESULT no result: the turn ended" {
			t.Fatalf("%q: %q", verdict, got)
		}
		var v map[string]any
		_ = json.Unmarshal(evs[4].Event.Value, &v)
		if evs[4].Event.Name != "baton.approval" || v["verdict"] != nilIfEmpty(verdict) || verdict != "" && v["rule"] != verdict+": Bash(git push*)" {
			t.Fatalf("%q: %s %s", verdict, evs[4].Event.Name, evs[4].Event.Value)
		}
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestApprovalHold: a decision by the timeout holds the prompt: the
// agent's turn that follows ends with the interrupt again (no tool call:
// it got its result, the hold); a follow-up turn after a late allow
// answers it; the run's end drops what is open.
func TestApprovalHold(t *testing.T) {
	chain := append(codexAsk("ask"),
		status("waiting", `,"reason":"approval"`),
		`input {"id":7,"result":{"decision":"decline"}} | Baton-Input-Kind=decision | Baton-Input-Seq=3 | Baton-Approval=7 | Baton-Decided-By=timeout`,
		status("running"),
		`events {"method":"item/completed","params":{"item":{"id":"c1","type":"commandExecution","command":"git push origin main","status":"declined"}}}`,
		`events {"method":"turn/completed","params":{"turn":{"status":"completed"}}}`,
		status("waiting", `,"reason":"approval"`),
		`input {"method":"turn/start","id":"baton-followup-7","params":{"threadId":"t","input":[{"type":"text","text":"approved: retry"}]}} | Baton-Input-Kind=followup | Baton-Input-Seq=4 | Baton-Approval=7 | Baton-Decided-By=bob`,
		`events {"method":"turn/completed","params":{"turn":{"status":"completed"}}}`,
		status("waiting"),
		`events {"method":"item/commandExecution/requestApproval","id":8,"params":{"itemId":"c2","command":"git push"}} | Baton-Approval=8 | Baton-Verdict=ask | Baton-Rule=default: ask`,
		status("paused"),
	)
	evs := project(agui.New("r"), msgs(chain...))
	got := summaries(t, evs)
	want := []string{"RUN_STARTED", "TOOL_CALL_START shell", `TOOL_CALL_ARGS {"command":"git push origin main"}`, "TOOL_CALL_END",
		"CUSTOM baton.approval", "CUSTOM baton.waiting", "RUN_FINISHED interrupt",
		"RUN_STARTED", "CUSTOM baton.approval_answer", "CUSTOM baton.running", "TOOL_CALL_RESULT declined", "CUSTOM baton.waiting", "RUN_FINISHED interrupt",
		"RUN_STARTED", "CUSTOM baton.approval_followup", "CUSTOM baton.waiting", "RUN_FINISHED success",
		"RUN_STARTED", "CUSTOM baton.approval", "RUN_FINISHED interrupt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	second := evs[12].Event.Outcome.Interrupts
	if len(second) != 1 || second[0].ID != "7" || second[0].ToolCallID != "" {
		t.Fatalf("the held prompt's interrupt: %+v", second)
	}
	if last := evs[len(evs)-1].Event.Outcome.Interrupts; len(last) != 1 || last[0].ID != "8" || last[0].Message != "Allow Bash: git push? (default: ask)" {
		t.Fatalf("paused with a prompt open: %+v", last)
	}
	restores(t, chain, evs)
}

// restores checks that a projector restored from the state after each
// message of chain gives the rest of evs: what is open is in the state.
func restores(t *testing.T, chain []string, evs []agui.Projected) {
	t.Helper()
	p := agui.New("r")
	all := msgs(chain...)
	for i, m := range all {
		p.Project(m)
		q := agui.New("r")
		if err := q.Restore(p.State()); err != nil {
			t.Fatal(err)
		}
		if a, b := golden(t, project(q, all[i+1:])), golden(t, evs[len(project(agui.New("r"), all[:i+1])):]); string(a) != string(b) {
			t.Fatalf("restored after message %d:\n%s\nwant\n%s", i+1, a, b)
		}
	}
}

// TestApprovalWaitFirst: a waiting status (reason approval) published
// before the prompt's line ends the turn at that line; one that no
// prompt follows (a running status comes) ends nothing.
func TestApprovalWaitFirst(t *testing.T) {
	c := codexAsk("ask")
	chain := []string{c[0], c[1], status("waiting", `,"reason":"approval"`), c[2]}
	evs := project(agui.New("r"), msgs(chain...))
	got := summaries(t, evs)
	want := []string{"RUN_STARTED", "TOOL_CALL_START shell", `TOOL_CALL_ARGS {"command":"git push origin main"}`, "TOOL_CALL_END",
		"CUSTOM baton.waiting", "CUSTOM baton.approval", "RUN_FINISHED interrupt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	restores(t, chain, evs)

	chain = []string{status("started"), status("waiting", `,"reason":"approval"`), status("running"), status("waiting")}
	got = summaries(t, project(agui.New("r"), msgs(chain...)))
	want = []string{"RUN_STARTED", "CUSTOM baton.waiting", "CUSTOM baton.running", "CUSTOM baton.waiting", "RUN_FINISHED success"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestResumeEntry(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  protocol.ApproveRequest
		bad   bool
	}{
		{`{"interruptId":"a1","status":"resolved","payload":{"approved":true}}`, protocol.ApproveRequest{ID: "a1", Allow: true, By: "me"}, false},
		{`{"interruptId":"a1","status":"resolved","payload":{"approved":false,"message":"not on Friday"}}`, protocol.ApproveRequest{ID: "a1", Message: "not on Friday", By: "me"}, false},
		{`{"interruptId":"a1","status":"resolved","payload":true,"metadata":{"by":"carol"}}`, protocol.ApproveRequest{ID: "a1", Allow: true, By: "carol"}, false},
		{`{"interruptId":"a1","status":"cancelled"}`, protocol.ApproveRequest{ID: "a1", Message: "the person asked cancelled the request", By: "me"}, false},
		{`{"interruptId":"a1","status":"resolved","payload":{"ok":true}}`, protocol.ApproveRequest{}, true},
		{`{"interruptId":"a1","status":"resolved"}`, protocol.ApproveRequest{}, true},
		{`{"interruptId":"a1","status":"later"}`, protocol.ApproveRequest{}, true},
		{`{"status":"cancelled"}`, protocol.ApproveRequest{}, true},
	} {
		var e agui.ResumeEntry
		if err := json.Unmarshal([]byte(tc.entry), &e); err != nil {
			t.Fatal(err)
		}
		got, err := e.Approval("me")
		if tc.bad {
			if !errors.Is(err, agui.ErrBadResume) {
				t.Errorf("%s: %+v %v, want ErrBadResume", tc.entry, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.entry, got, err, tc.want)
		}
	}
	for entry, want := range map[string]string{
		`{"interruptId":"a1","status":"cancelled","metadata":{"runId":"run-7"}}`:       "run-7",
		`{"interruptId":"a1","status":"cancelled","metadata":{"runId":"no such/run"}}`: "",
		`{"interruptId":"a1","status":"cancelled"}`:                                    "",
	} {
		var e agui.ResumeEntry
		_ = json.Unmarshal([]byte(entry), &e)
		if got := e.RunID(); got != want {
			t.Errorf("%s: runId %q, want %q", entry, got, want)
		}
	}
}
