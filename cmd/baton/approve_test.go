package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// evApproval is a prompt line of a run with a policy, or a decision or
// follow-up input, with the headers client.Watch decodes.
func evApproval(kind protocol.RunKind, data, id, verdict, rule, inputKind, by string) client.Event {
	ev := evLine(kind, data)
	ev.Approval, ev.Verdict, ev.Rule, ev.InputKind, ev.DecidedBy = id, verdict, rule, inputKind, by
	return ev
}

// TestApprovalFormat: watch shows a prompt the policy saw with its rule
// (and, when a person is asked, how to answer), and each decision baton
// wrote with who decided it and by which rule.
func TestApprovalFormat(t *testing.T) {
	const (
		ev = protocol.KindEvents
		in = protocol.KindInput
		d  = protocol.InputKindDecision
	)
	prompt := func(id, cmd string) string {
		return `{"type":"control_request","request_id":"` + id + `","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"` + cmd + `"}}}`
	}
	allow := func(id string) string {
		return `{"type":"control_response","response":{"subtype":"success","request_id":"` + id + `","response":{"behavior":"allow","updatedInput":{}}}}`
	}
	deny := func(id, why string) string {
		return `{"type":"control_response","response":{"subtype":"success","request_id":"` + id + `","response":{"behavior":"deny","message":"` + why + `"}}}`
	}
	got := render(t, false, false,
		evApproval(ev, prompt("r1", "git status"), "r1", "allow", "allow: Bash(git status*)", "", ""),
		evApproval(in, allow("r1"), "r1", "", "allow: Bash(git status*)", d, protocol.DecidedByPolicy),
		evApproval(ev, prompt("r2", "curl x"), "r2", "deny", "deny: Bash(curl *)", "", ""),
		evApproval(in, deny("r2", "denied by policy"), "r2", "", "deny: Bash(curl *)", d, protocol.DecidedByPolicy),
		evApproval(ev, prompt("r3", "git push"), "r3", "ask", "ask: Bash(git push*)", "", ""),
		evApproval(in, deny("r3", "awaits approval"), "r3", "", "", d, protocol.DecidedByTimeout),
		evApproval(in, `{"type":"user","message":{"role":"user","content":"allowed: retry"}}`, "r3", "", "", protocol.InputKindFollowUp, "alice"),
		evApproval(ev, prompt("r4", "make deploy"), "r4", "ask", "default: ask", "", ""),
		evApproval(in, deny("r4", "not today"), "r4", "", "", d, "bob"),
		evApproval(ev, `{"method":"item/commandExecution/requestApproval","id":7,"params":{"threadId":"t","itemId":"i","command":"ls -la"}}`, "7", "allow", "allow: Bash(ls*)", "", ""),
		evApproval(in, `{"id":7,"result":{"decision":"accept"}}`, "7", "", "allow: Bash(ls*)", d, protocol.DecidedByPolicy),
		evApproval(in, `{"id":8,"result":{"decision":"decline"}}`, "8", "", "", d, "bob"),
	)
	want := `? Bash asks: git status  [allow: Bash(git status*)]
[decision] allow Bash by policy (allow: Bash(git status*))
? Bash asks: curl x  [deny: Bash(curl *)]
[decision] deny Bash by policy (deny: Bash(curl *)): denied by policy
? Bash asks: git push  [ask: Bash(git push*)]  (baton approve RUNID r3 [--deny])
[decision] hold Bash: nobody answered in time; the agent is told it awaits approval  (baton approve RUNID r3 [--deny])
[followup] Bash allowed by alice after its hold: the agent is asked to retry it
? Bash asks: make deploy  [default: ask]  (baton approve RUNID r4 [--deny])
[decision] deny Bash by bob: not today
? Bash asks: ls -la  [allow: Bash(ls*)]
[decision] allow Bash by policy (allow: Bash(ls*))
[decision] deny request 8 by bob
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// A run without a policy: its prompts as before, y/n to answer.
	if got := render(t, false, false, evLine(ev, prompt("r5", "make test"))); got != "? Bash asks: make test  [request r5]\n" {
		t.Fatalf("a prompt without a policy: %q", got)
	}
}

func TestApprovalsTable(t *testing.T) {
	asked := time.Date(2026, 12, 5, 15, 0, 0, 0, time.Local)
	decided := asked.Add(90 * time.Second)
	var b strings.Builder
	err := printApprovals(&b, []protocol.Approval{
		{RunID: "run-1", ID: "toolu_1", Tool: "Bash", Target: "git status", Verdict: "allow", Rule: "allow: Bash(git status*)",
			State: protocol.ApprovalAllowed, AskedAt: asked, DecidedBy: "policy", DecidedAt: &asked},
		{RunID: "run-1", ID: "toolu_2", Tool: "Bash", Target: "git push\norigin", Verdict: "ask", Rule: "ask: Bash(git push*)",
			State: protocol.ApprovalPending, AskedAt: asked, HeldAt: &decided},
		{RunID: "run-2", ID: "h0123456789abcdef", Tool: "Edit", Target: "/workspace/a.go", Verdict: "ask", Rule: "default: ask",
			State: protocol.ApprovalDenied, AskedAt: asked, DecidedBy: "bob", DecidedAt: &decided},
	})
	if err != nil {
		t.Fatal(err)
	}
	at := asked.Format("2006-01-02 15:04:05 MST")
	want := "RUN    ID                 TOOL  TARGET           VERDICT/RULE              STATE           ASKED" + strings.Repeat(" ", len(at)-5) + "  DECIDED BY\n" +
		"run-1  toolu_1            Bash  git status       allow: Bash(git status*)  allowed         " + at + "  policy 15:00:00\n" +
		"run-1  toolu_2            Bash  git push origin  ask: Bash(git push*)      pending (held)  " + at + "  -\n" +
		"run-2  h0123456789abcdef  Edit  /workspace/a.go  default: ask              denied          " + at + "  bob 15:01:30\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	decidedText := decidedText(protocol.Approval{State: protocol.ApprovalAllowed, DecidedBy: "policy", Rule: "allow: Bash(ls*)", DecidedAt: &decided})
	if decidedText != "allowed by policy (allow: Bash(ls*)) at "+decided.Format("2006-01-02 15:04:05 MST") {
		t.Fatalf("decided text %q", decidedText)
	}
}
