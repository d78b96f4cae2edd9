package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestApproveEncoding: Approve and Approvals send the contract's bodies
// on the contract's subjects, and map each refusal's code to its
// sentinel. A tiny micro service stands in for the workers' endpoints:
// what the real ones do is tested end to end in cmd/baton and test/.
func TestApproveEncoding(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	decided := time.Date(2026, 12, 5, 15, 30, 0, 0, time.UTC)
	var mu sync.Mutex
	var got []protocol.ApproveRequest
	var gotSubjects []string
	svc, err := micro.AddService(nc, micro.Config{Name: "fake-approvals", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("approve", micro.HandlerFunc(func(r micro.Request) {
		var req protocol.ApproveRequest
		if err := json.Unmarshal(r.Data(), &req); err != nil {
			_ = r.Error(protocol.ApprovalBad, "bad body", nil)
			return
		}
		mu.Lock()
		got = append(got, req)
		gotSubjects = append(gotSubjects, r.Subject())
		mu.Unlock()
		runID := r.Subject()[strings.LastIndexByte(r.Subject(), '.')+1:]
		switch req.ID {
		case "answered":
			rec, _ := json.Marshal(protocol.Approval{RunID: runID, ID: req.ID, State: protocol.ApprovalAllowed, DecidedBy: "alice", DecidedAt: &decided})
			_ = r.Error(protocol.ApprovalConflict, "approval answered was allowed by alice at 2026-12-05T15:30:00Z", rec)
		case "b": // a refusal without the record: the client reads it
			_ = r.Error(protocol.ApprovalConflict, "decided before", nil)
		case "nosuch":
			_ = r.Error(protocol.ApprovalNotFound, "run r-1 has no approval nosuch", nil)
		case "ended":
			_ = r.Error(protocol.ApprovalGone, "run r-1 ended", nil)
		case "broken":
			_ = r.Error(protocol.ApprovalFailed, "the bucket is gone", nil)
		default:
			state := protocol.ApprovalAllowed
			if !req.Allow {
				state = protocol.ApprovalDenied
			}
			_ = r.RespondJSON(protocol.Approval{RunID: runID, ID: req.ID, State: state, DecidedBy: req.By, Message: req.Message, DecidedAt: &decided})
		}
	}), micro.WithEndpointSubject(names.ApproveRequests()))
	if err != nil {
		t.Fatal(err)
	}
	err = svc.AddEndpoint("approvals", micro.HandlerFunc(func(r micro.Request) {
		var q protocol.ApprovalsQuery
		if err := json.Unmarshal(r.Data(), &q); err != nil {
			_ = r.Error(protocol.ApprovalBad, "bad query", nil)
			return
		}
		all := []protocol.Approval{
			{RunID: "r-1", ID: "a", State: protocol.ApprovalPending, Tool: "Bash", Target: "make test"},
			{RunID: "r-1", ID: "b", State: protocol.ApprovalAllowed, DecidedBy: "policy"},
			{RunID: "r-2", ID: "c", State: protocol.ApprovalPending},
		}
		var rep protocol.ApprovalsReply
		for _, a := range all {
			if (q.RunID == "" || a.RunID == q.RunID) && (!q.Pending || a.State == protocol.ApprovalPending) {
				rep.Approvals = append(rep.Approvals, a)
			}
		}
		if q.Limit > 0 && len(rep.Approvals) > q.Limit {
			rep.Approvals, rep.Truncated = rep.Approvals[:q.Limit], true
		}
		_ = r.RespondJSON(rep)
	}), micro.WithEndpointSubject(names.ReadApprovalsSubject()))
	if err != nil {
		t.Fatal(err)
	}

	ctx := ctxT(t)
	a, err := c.Approve(ctx, "r-1", "req-1")
	if err != nil || a.State != protocol.ApprovalAllowed || a.RunID != "r-1" || a.ID != "req-1" {
		t.Fatalf("allow: %+v, %v", a, err)
	}
	a, err = c.Approve(ctx, "r-1", "req-2", client.WithDeny("not on main"), client.WithDecidedBy("bob"))
	if err != nil || a.State != protocol.ApprovalDenied || a.DecidedBy != "bob" || a.Message != "not on main" {
		t.Fatalf("deny: %+v, %v", a, err)
	}
	mu.Lock()
	want := []protocol.ApproveRequest{{ID: "req-1", Allow: true}, {ID: "req-2", Message: "not on main", By: "bob"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] || gotSubjects[0] != "baton.control.approve.r-1" {
		t.Fatalf("requests %+v on %v, want %+v on baton.control.approve.r-1", got, gotSubjects, want)
	}
	mu.Unlock()

	a, err = c.Approve(ctx, "r-1", "answered")
	if !errors.Is(err, client.ErrApprovalConflict) || a.DecidedBy != "alice" || a.DecidedAt == nil || !a.DecidedAt.Equal(decided) ||
		!strings.Contains(err.Error(), "allowed by alice") {
		t.Fatalf("a second answer: %+v, %v", a, err)
	}
	a, err = c.Approve(ctx, "r-1", "b")
	if !errors.Is(err, client.ErrApprovalConflict) || a.DecidedBy != "policy" || a.ID != "b" {
		t.Fatalf("a second answer, refused without the record: %+v, %v", a, err)
	}
	for id, want := range map[string]error{"nosuch": client.ErrApprovalNotFound, "ended": client.ErrRunEnded} {
		if _, err := c.Approve(ctx, "r-1", id); !errors.Is(err, want) {
			t.Errorf("approve %s: %v, want %v", id, err, want)
		}
	}
	if _, err := c.Approve(ctx, "r-1", "ended"); !errors.Is(err, client.ErrTerminal) {
		t.Errorf("an ended run's approval is not ErrTerminal: %v", err)
	}
	if _, err := c.Approve(ctx, "r-1", "broken"); err == nil || !strings.Contains(err.Error(), "refused (500): the bucket is gone") {
		t.Errorf("a failed approve: %v", err)
	}
	if _, err := c.Approve(ctx, "bad run", "x"); !errors.Is(err, protocol.ErrBadRunID) {
		t.Errorf("bad runId: %v", err)
	}
	if _, err := c.Approve(ctx, "r-1", ""); !errors.Is(err, client.ErrApprovalNotFound) {
		t.Errorf("empty id: %v", err)
	}

	rep, err := c.Approvals(ctx, protocol.ApprovalsQuery{Pending: true})
	if err != nil || len(rep.Approvals) != 2 || rep.Approvals[0].ID != "a" || rep.Approvals[1].ID != "c" {
		t.Fatalf("pending approvals: %+v, %v", rep, err)
	}
	rep, err = c.Approvals(ctx, protocol.ApprovalsQuery{RunID: "r-1", Limit: 1})
	if err != nil || len(rep.Approvals) != 1 || !rep.Truncated {
		t.Fatalf("r-1's approvals, limit 1: %+v, %v", rep, err)
	}
	if a, err := c.Approval(ctx, "r-1", "b"); err != nil || a.DecidedBy != "policy" {
		t.Fatalf("approval b: %+v, %v", a, err)
	}
	if _, err := c.Approval(ctx, "r-1", "z"); !errors.Is(err, client.ErrApprovalNotFound) {
		t.Fatalf("approval z: %v", err)
	}
}

// TestWatchApprovals: notices of one run, or of all, come decoded; a
// message whose record is not the run its subject names is dropped.
func TestWatchApprovals(t *testing.T) {
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	publish := func(subject string, a protocol.Approval) {
		b, _ := json.Marshal(a)
		if err := nc.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct{ all, one []string }
	var mu sync.Mutex
	var got seen
	ready := make(chan struct{}, 2)
	watch := func(runID string, into *[]string) {
		go func() {
			_ = c.WatchApprovals(ctx, runID, func(a protocol.Approval) error {
				mu.Lock()
				*into = append(*into, a.RunID+"/"+a.ID+"/"+a.State)
				mu.Unlock()
				return nil
			}, client.OnSubscribed(func() error { ready <- struct{}{}; return nil }))
		}()
	}
	watch("", &got.all)
	watch("r-1", &got.one)
	<-ready
	<-ready
	publish(names.ApprovalNoticeSubject("r-1"), protocol.Approval{RunID: "r-1", ID: "a", State: protocol.ApprovalPending})
	publish(names.ApprovalNoticeSubject("r-2"), protocol.Approval{RunID: "r-2", ID: "b", State: protocol.ApprovalPending})
	publish(names.ApprovalNoticeSubject("r-1"), protocol.Approval{RunID: "r-2", ID: "forged", State: protocol.ApprovalAllowed})
	if err := nc.Publish(names.ApprovalNoticeSubject("r-1"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	publish(names.ApprovalNoticeSubject("r-1"), protocol.Approval{RunID: "r-1", ID: "a", State: protocol.ApprovalAllowed})
	testenv.WaitFor(t, 5*time.Second, "the notices", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got.all) == 3 && len(got.one) == 2
	})
	time.Sleep(100 * time.Millisecond) // nothing more comes
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got.all, " ") != "r-1/a/pending r-2/b/pending r-1/a/allowed" || strings.Join(got.one, " ") != "r-1/a/pending r-1/a/allowed" {
		t.Fatalf("notices: all %v, r-1's %v", got.all, got.one)
	}
	if err := c.WatchApprovals(ctx, "bad run", func(protocol.Approval) error { return nil }); !errors.Is(err, protocol.ErrBadRunID) {
		t.Fatalf("bad runId: %v", err)
	}
}
