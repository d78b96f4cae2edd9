package console_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// TestRerun: a run whose record kept its job (it had retries) runs again
// under a new runId, the same job without the labels baton set; a run
// whose record kept none is refused, saying why. A run's page gets the
// start of its job's input.
func TestRerun(t *testing.T) {
	e := setup(t)
	cfg := config.Default()
	cfg.Profiles["echo"] = config.Profile{Command: []string{"/bin/sh", "-c", "echo ran"}, Timeout: time.Minute}
	c := e.startWorker(t, cfg)
	// Any run is re-run, retries or not; one whose job was too large to
	// keep beside its record says why it cannot be.
	kept := protocol.Job{RunID: "kept-1", Profile: "echo", Retries: 1, Input: "say hi", Labels: map[string]string{"team": "a"}}
	plain := protocol.Job{RunID: "plain-1", Profile: "echo", Input: "once"}
	large := protocol.Job{RunID: "large-1", Profile: "echo", Input: strings.Repeat("x", protocol.MaxKeptJob)}
	for _, j := range []protocol.Job{kept, plain, large} {
		if err := c.Submit(ctxT(t), j); err != nil {
			t.Fatal(err)
		}
	}
	type info struct {
		Input string
		Rerun bool
	}
	runInfo := func(id string) (i info) { get(t, e.srv.URL+"/api/runs/"+id, &i); return i }
	testenv.WaitFor(t, 20*time.Second, "the runs to succeed", func() bool {
		for _, id := range []string{"kept-1", "plain-1", "large-1"} {
			if rec, err := c.Run(ctxT(t), id); err != nil || rec.State != "succeeded" {
				return false
			}
		}
		return true
	})
	for id, want := range map[string]info{"kept-1": {"say hi", true}, "plain-1": {"once", true}, "large-1": {kv.InputPreview(large.Input), false}} {
		if i := runInfo(id); i != want {
			t.Errorf("run %s's page: %.60v, want %.60v", id, i, want)
		}
	}

	for _, j := range []protocol.Job{kept, plain} {
		code, body := post(t, e.srv.URL+"/api/runs/"+j.RunID+"/rerun", "")
		var rep struct{ RunID string }
		if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || !protocol.ValidRunID(rep.RunID) || rep.RunID == j.RunID {
			t.Fatalf("re-run of %s: %d %s", j.RunID, code, body)
		}
		testenv.WaitFor(t, 20*time.Second, "the re-run "+rep.RunID+" to succeed", func() bool {
			rec, err := c.Run(ctxT(t), rep.RunID)
			return err == nil && rec.State == "succeeded"
		})
		rec, err := c.Run(ctxT(t), rep.RunID)
		if err != nil || rec.Profile != "echo" || rec.Input != j.Input || rec.Retries != j.Retries || rec.Attempt != 1 ||
			len(rec.Labels) != len(j.Labels) || rec.Labels["team"] != j.Labels["team"] {
			t.Fatalf("the re-run's record %+v (%v), want %s's job", rec, err, j.RunID)
		}
	}

	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/api/runs/large-1/rerun", "a worker keeps a job in its run's record only up to 256 KiB", 409},
		{"/api/runs/nosuchrun/rerun", "not found", 404},
	} {
		if code, body := post(t, e.srv.URL+tc.path, ""); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s: %d %s, want %d %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	ro, err := console.New(t.Context(), e.js, names, console.WithToken(token), console.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	if code, body := post(t, roSrv.URL+"/api/runs/kept-1/rerun", ""); code != 403 {
		t.Errorf("re-run on a read-only console: %d %s", code, body)
	}
}

// TestDLQActions: a dead letter is retried (its job submitted again under
// its own run id, once), one whose job is malformed is refused; delete
// removes an entry through a console whose NATS user administers the DLQ
// stream, and through one whose user may not it says so. A read-only
// console refuses both.
func TestDLQActions(t *testing.T) {
	deleteDenied := &server.Permissions{Publish: &server.SubjectPermission{Deny: []string{"$JS.API.STREAM.MSG.DELETE.>"}}}
	s := testenv.RunServerWith(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "a"}, {Username: "app", Password: "b", Permissions: deleteDenied}}
	})
	connect := func(user, pass string) (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, pass))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	adminNC, adminJS := connect("admin", "a")
	_, appJS := connect("app", "b")
	ctx := ctxT(t)
	if _, err := provision.Ensure(ctx, adminJS, names, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	stop, err := worker.ServeReadRelay(t.Context(), adminNC, names, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	serve := func(js jetstream.JetStream, opts ...console.Option) string {
		c, err := console.New(t.Context(), js, names, append(opts, console.WithToken(token))...)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	admin, app, readOnly := serve(adminJS), serve(appJS), serve(adminJS, console.WithReadOnly())
	put := func(reason protocol.Reason, job string) uint64 {
		msg := nats.NewMsg(names.DLQSubject(reason))
		msg.Data = []byte(job)
		msg.Header.Set(protocol.HeaderReason, string(reason))
		msg.Header.Set(protocol.HeaderError, "rejected for the test")
		ack, err := adminJS.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	later := put(protocol.ReasonUnknownProfile, `{"runId":"dl-1","profile":"later"}`)
	malformed := put(protocol.ReasonUnknownField, `{"runId":"dl-2","profile":"later","nosuch":1}`)

	if code, body := post(t, readOnly+fmt.Sprintf("/api/dlq/%d/retry", later), ""); code != 403 {
		t.Errorf("retry on a read-only console: %d %s", code, body)
	}
	if code, body := post(t, app+fmt.Sprintf("/api/dlq/%d/retry", later), ""); code != 200 || !strings.Contains(body, `"runId":"dl-1"`) {
		t.Fatalf("retry of dead letter %d: %d %s", later, code, body)
	}
	jobs, err := adminJS.Stream(ctx, names.JobsStream())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := jobs.GetLastMsgForSubject(ctx, names.RunJobSubject()); err != nil || !strings.Contains(string(m.Data), `"runId":"dl-1"`) {
		t.Fatalf("the jobs stream after the retry: %v %v", m, err)
	}
	for _, tc := range []struct {
		seq  uint64
		code int
		want string
	}{
		{later, 409, "submitted again already"},
		{malformed, 409, "refused for its own content"},
		{malformed + 100, 404, "no such dead letter"},
	} {
		if code, body := post(t, app+fmt.Sprintf("/api/dlq/%d/retry", tc.seq), ""); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("retry of dead letter %d: %d %s, want %d %q", tc.seq, code, body, tc.code, tc.want)
		}
	}

	del := func(base string, seq string) (int, string) { return call(t, "DELETE", base+"/api/dlq/"+seq, "") }
	if code, body := del(readOnly, fmt.Sprint(later)); code != 403 {
		t.Errorf("delete on a read-only console: %d %s", code, body)
	}
	if code, body := del(app, fmt.Sprint(later)); code != 503 || !strings.Contains(body, "needs a NATS user that may administer stream") {
		t.Errorf("delete by a user that may not: %d %s", code, body)
	}
	if code, body := del(admin, fmt.Sprint(later)); code != 200 {
		t.Fatalf("delete by an administrator: %d %s", code, body)
	}
	for _, tc := range []struct {
		seq  string
		code int
	}{{fmt.Sprint(later), 404}, {"x", 400}} {
		if code, body := del(admin, tc.seq); code != tc.code {
			t.Errorf("delete of dead letter %s: %d %s, want %d", tc.seq, code, body, tc.code)
		}
	}
	var left []struct{ Seq uint64 }
	get(t, admin+"/api/dlq", &left)
	if len(left) != 1 || left[0].Seq != malformed {
		t.Errorf("the DLQ after the delete: %+v, want only %d", left, malformed)
	}
}
