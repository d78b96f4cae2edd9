package console_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// policyChat is a profile "chat", the fake agent's conversation, whose
// policy asks a person about every Bash command but git status.
func policyChat(t *testing.T) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(path, []byte(`profiles:
  chat:
    command: ["{baton}", fake-agent, --chat]
    stdin: stream
    timeout: 2m
    askTimeout: 1m
    policy: {default: ask, allow: ["Bash(git status*)"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestApprovalsAPI: against a real worker, a run's page lists its
// approvals; Allow answers a pending one (decided by the console), a
// second answer is 409 with the record saying who decided, Deny gives the
// agent its reason, an unknown id is 404.
func TestApprovalsAPI(t *testing.T) {
	e := setup(t)
	c := e.startWorker(t, policyChat(t))
	const runID = "appr-con-1"
	if err := c.Submit(ctxT(t), protocol.Job{RunID: runID, Profile: "chat", Input: "approve: make test"}); err != nil {
		t.Fatal(err)
	}
	type list struct{ Approvals []protocol.Approval }
	waitPending := func(id string) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, "approval "+id+" pending", func() bool {
			var l list
			if getStatus(t, e.srv.URL+"/api/runs/"+runID+"/approvals", &l) != 200 {
				return false
			}
			for _, a := range l.Approvals {
				if a.ID == id && a.Open() {
					return true
				}
			}
			return false
		})
	}
	waitPending("req-1")
	u := e.srv.URL + "/api/runs/" + runID + "/approvals/"
	code, body := post(t, u+"req-1", `{"allow":true}`)
	var a protocol.Approval
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || a.State != protocol.ApprovalAllowed || a.DecidedBy != "console" {
		t.Fatalf("allow: %d %s", code, body)
	}
	code, body = post(t, u+"req-1", `{"allow":false,"message":"too late"}`)
	var conflict struct {
		Error    string
		Approval protocol.Approval
	}
	if code != 409 || json.Unmarshal([]byte(body), &conflict) != nil || conflict.Approval.DecidedBy != "console" ||
		conflict.Approval.State != protocol.ApprovalAllowed || conflict.Error == "" {
		t.Fatalf("a second answer: %d %s", code, body)
	}
	if code, body := post(t, u+"nosuch", `{"allow":true}`); code != 404 {
		t.Fatalf("an unknown approval: %d %s", code, body)
	}
	// The fake agent drops what it reads while it waits on a prompt: the
	// next turn goes once the answer was written to it.
	testenv.WaitFor(t, 30*time.Second, "req-1's answer written", func() bool {
		a, err := c.Approval(ctxT(t), runID, "req-1")
		return err == nil && a.AnswerSeq > 0
	})
	if _, err := c.Send(ctxT(t), runID, []byte("approve: make deploy")); err != nil {
		t.Fatal(err)
	}
	waitPending("req-2")
	code, body = post(t, u+"req-2", `{"allow":false,"message":"not today"}`)
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || a.State != protocol.ApprovalDenied || a.Message != "not today" {
		t.Fatalf("deny: %d %s", code, body)
	}
	var l list
	get(t, e.srv.URL+"/api/runs/"+runID+"/approvals", &l)
	if len(l.Approvals) != 2 || l.Approvals[0].ID != "req-1" || l.Approvals[1].State != protocol.ApprovalDenied {
		t.Fatalf("approvals: %+v", l.Approvals)
	}
	if !strings.Contains(l.Approvals[1].Rule, "ask") {
		t.Fatalf("rule of req-2: %q", l.Approvals[1].Rule)
	}
}
