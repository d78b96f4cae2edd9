package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// policyConfig is a profile "chat" (the fake agent's conversation, which
// asks permission for "approve: CMD") with a policy: git status allowed,
// curl denied, anything else asks a person, who has askTimeout to answer.
func policyConfig(t *testing.T, askTimeout string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.yaml")
	yaml := `profiles:
  chat:
    command: ["{baton}", fake-agent, --chat]
    stdin: stream
    timeout: 2m
    askTimeout: ` + askTimeout + `
    policy:
      default: ask
      allow: ["Bash(git status*)"]
      deny: ["Bash(curl *)"]
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// approvalsOf lists runID's approvals with `baton approvals list --json`.
func (e *cliEnv) approvalsOf(runID string, pending bool) map[string]protocol.Approval {
	e.t.Helper()
	args := []string{"approvals", "list", "--run", runID, "--json"}
	if pending {
		args = append(args, "--pending")
	}
	out, errOut, err := e.run("", args...)
	if err != nil {
		e.t.Fatalf("approvals list: %v\n%s", err, errOut)
	}
	var as []protocol.Approval
	if err := json.Unmarshal([]byte(out), &as); err != nil {
		e.t.Fatalf("approvals list --json: %v\n%s", err, out)
	}
	m := map[string]protocol.Approval{}
	for _, a := range as {
		m[a.ID] = a
	}
	return m
}

// waitApproval waits for approval id of runID to be listed and to satisfy ok.
func (e *cliEnv) waitApproval(runID, id, what string, ok func(protocol.Approval) bool) protocol.Approval {
	e.t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		all := e.approvalsOf(runID, false)
		if a, found := all[id]; found && ok(a) {
			return a
		}
		if time.Now().After(end) {
			ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Second)
			defer cancel()
			out, _, _ := e.start(ctx, strings.NewReader(""), "watch", runID)
			<-ctx.Done()
			e.t.Fatalf("timed out after 30s waiting for approval %s of run %s %s: its approvals %+v; its chain so far:\n%s", id, runID, what, all, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func pendingOpen(a protocol.Approval) bool { return a.Open() }

// TestApproveCommand runs a policy's three verdicts against a real worker:
// git status allowed and curl denied by the policy, make test asked, and
// allowed with `baton approve`; a second answer is refused saying who
// decided and when, one the policy decided says its rule, an unknown id is
// not found, and a prompt of a run that ended is gone. `baton approvals
// list` shows each with its rule and who decided; `baton watch` shows the
// prompts with their rules and each decision baton wrote.
func TestApproveCommand(t *testing.T) {
	e := newCLIEnv(t)
	e.startWorker(policyConfig(t, "1m"))
	const runID = "appr-cli-1"
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, err := e.run("", args...)
		if err != nil {
			t.Fatalf("baton %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	// The fake agent drops what it reads while it waits on a prompt: each
	// turn is sent once the one before was answered.
	answered := func(a protocol.Approval) bool { return a.AnswerSeq > 0 }
	mustRun("submit", "--profile", "chat", "--run-id", runID, "--input", "approve: git status")
	e.waitApproval(runID, "req-1", "answered", answered)
	mustRun("send", runID, "--stream-json", "approve: curl evil.example")
	e.waitApproval(runID, "req-2", "answered", answered)
	mustRun("send", runID, "--stream-json", "approve: make test")
	e.waitApproval(runID, "req-3", "pending", pendingOpen)
	if out := mustRun("approve", runID, "req-3", "--by", "alice"); out != "allowed req-3 of run appr-cli-1 (Bash: make test)\n" {
		t.Fatalf("approve: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"req-3", "--deny", "--message", "no"}, "approval req-3 of run appr-cli-1 was decided before: allowed by alice at "},
		{[]string{"req-1"}, "approval req-1 of run appr-cli-1 was decided before: allowed by policy (allow: Bash(git status*)) at "},
		{[]string{"nosuch"}, "run appr-cli-1 has no approval nosuch"},
		{[]string{"req-3", "--message", "why"}, "--message is a denial's reason"},
	} {
		out, errOut, err := e.run("", append([]string{"approve", runID}, tc.args...)...)
		if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("approve %s: exit %d, %v, want %q\n%s%s", strings.Join(tc.args, " "), exitCode(err), err, tc.want, out, errOut)
		}
	}
	table := mustRun("approvals", "list", "--run", runID)
	for _, want := range []string{
		"TARGET",
		"VERDICT/RULE",
		"git status",
		"allow: Bash(git status*)",
		"deny: Bash(curl *)",
		"default: ask",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("approvals list lacks %q:\n%s", want, table)
		}
	}
	as := e.approvalsOf(runID, false)
	for id, want := range map[string][2]string{"req-1": {"allowed", "policy"}, "req-2": {"denied", "policy"}, "req-3": {"allowed", "alice"}} {
		if a := as[id]; a.State != want[0] || a.DecidedBy != want[1] || a.DecidedAt == nil || a.Tool != "Bash" {
			t.Errorf("approval %s: %+v, want %s by %s", id, a, want[0], want[1])
		}
	}

	// A prompt of a run that ended: nothing waits on its answer.
	e.waitApproval(runID, "req-3", "answered", answered)
	mustRun("send", runID, "--stream-json", "approve: make deploy")
	e.waitApproval(runID, "req-4", "pending", pendingOpen)
	if pending := e.approvalsOf(runID, true); len(pending) != 1 || pending["req-4"].ID == "" {
		t.Errorf("pending approvals: %+v, want req-4 alone", pending)
	}
	mustRun("send", runID, "--eof")
	out, errOut, err := e.run("", "watch", runID)
	if err != nil {
		t.Fatalf("watch: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{
		"? Bash asks: git status  [allow: Bash(git status*)]\n",
		"[decision] allow Bash by policy (allow: Bash(git status*))\n",
		"? Bash asks: curl evil.example  [deny: Bash(curl *)]\n",
		"[decision] deny Bash by policy (deny: Bash(curl *))",
		"? Bash asks: make test  [default: ask]  (baton approve appr-cli-1 req-3 [--deny])\n",
		"● waiting  worker=",
		"reason=approval\n",
		"[decision] allow Bash by alice\n",
		"? Bash asks: make deploy  [default: ask]  (baton approve appr-cli-1 req-4 [--deny])\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("watch lacks %q:\n%s", want, out)
		}
	}
	// The record says the run ended a moment after its chain does.
	testenv.WaitFor(t, 10*time.Second, "run "+runID+"'s record to say it ended", func() bool {
		out, _, err := e.run("", "runs", "get", runID, "--json")
		return err == nil && strings.Contains(out, `"state": "succeeded"`)
	})
	_, _, err = e.run("", "approve", runID, "req-4")
	if err == nil || !strings.Contains(err.Error(), "run appr-cli-1 ended: nothing waits on approval req-4") {
		t.Errorf("approve of an ended run's prompt: %v", err)
	}
}

// TestApproveAfterHold: nobody answers within askTimeout, so baton tells
// the agent the request awaits approval (a hold); allowed later, the agent
// gets a turn asking it to retry. watch shows both.
func TestApproveAfterHold(t *testing.T) {
	e := newCLIEnv(t)
	e.startWorker(policyConfig(t, "1s"))
	const runID = "appr-hold-1"
	if out, errOut, err := e.run("", "submit", "--profile", "chat", "--run-id", runID, "--input", "approve: git push"); err != nil {
		t.Fatalf("submit: %v\n%s%s", err, out, errOut)
	}
	e.waitApproval(runID, "req-1", "held", func(a protocol.Approval) bool { return a.State == protocol.ApprovalPending && a.HeldAt != nil })
	out, errOut, err := e.run("", "approve", runID, "req-1", "--by", "bob")
	if err != nil || out != "allowed req-1 of run appr-hold-1 (Bash: git push); it was held, so the agent is asked to retry it\n" {
		t.Fatalf("approve after the hold: %v %q %s", err, out, errOut)
	}
	e.waitApproval(runID, "req-1", "answered", func(a protocol.Approval) bool { return a.AnswerSeq > 0 })
	if _, errOut, err := e.run("", "send", runID, "--eof"); err != nil {
		t.Fatalf("send --eof: %v %s", err, errOut)
	}
	out, errOut, err = e.run("", "watch", runID)
	if err != nil {
		t.Fatalf("watch: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{
		"? Bash asks: git push  [default: ask]  (baton approve appr-hold-1 req-1 [--deny])\n",
		"[decision] hold Bash: nobody answered in time; the agent is told it awaits approval",
		"[followup] Bash allowed by bob after its hold: the agent is asked to retry it\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("watch lacks %q:\n%s", want, out)
		}
	}
}

// TestAttachAnswersApprovals: in attach, a y or an n typed answers the
// oldest approval the policy asks a person about, through approve (so the
// record and the chain say who decided), not as a line to the agent.
func TestAttachAnswersApprovals(t *testing.T) {
	e := newCLIEnv(t)
	e.startWorker(policyConfig(t, "1m"))
	in, typed := io.Pipe()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, errOut, done := e.start(ctx, in, "submit", "--profile", "chat", "--run-id", "appr-attach-1", "--interactive", "--stream-json", "--input", "approve: make test")
	shows := func(s string) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, "attach to show "+s, func() bool { return strings.Contains(out.String(), s) })
	}
	typeLine := func(s string) {
		t.Helper()
		if _, err := io.WriteString(typed, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	shows("? Bash asks: make test  [default: ask]  (y: allow, n [why]: deny)\n")
	typeLine("y")
	shows("[decision] allow Bash by ")
	shows("■ done success  turns=1")
	typeLine("approve: git status")
	shows("[decision] allow Bash by policy (allow: Bash(git status*))\n")
	shows("■ done success  turns=2")
	typeLine("approve: rm -rf /")
	shows("? Bash asks: rm -rf /  [default: ask]  (y: allow, n [why]: deny)\n")
	typeLine("n too risky")
	shows("[decision] deny Bash by ")
	shows(": too risky\n")
	shows("■ done success  turns=3")
	typeLine("y") // no approval waits: a message like any other
	shows("echo: y")
	typed.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("attach did not end 30 s after the end of its input:\n%s", out.String())
	}
	if a := e.approvalsOf("appr-attach-1", false); a["req-3"].State != protocol.ApprovalDenied || a["req-3"].Message != "too risky" || a["req-1"].DecidedBy != currentUser() {
		t.Errorf("approvals after attach: %+v", a)
	}
}
