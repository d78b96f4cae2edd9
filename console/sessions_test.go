package console_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

type sessionsPage struct {
	Sessions []client.SessionView `json:"sessions"`
	Errors   []string             `json:"errors"`
}

type sessionPage struct {
	Session client.SessionView `json:"session"`
	Runs    map[string]struct {
		State string `json:"state"`
	} `json:"runs"`
}

// TestSessionsPages: the sessions list (with its label filter) and a
// session's page (its runs' states, its checkpoints) follow a real
// worker's session; the page's send starts the paused session's next run
// once however often it is retried, wrapped as a stream-json message when
// asked; fork and delete answer as the CLI's do, a refusal with its own
// status; a read-only console refuses all three.
func TestSessionsPages(t *testing.T) {
	e := setup(t)
	var empty sessionsPage
	if get(t, e.srv.URL+"/api/sessions", &empty); empty.Sessions == nil || len(empty.Sessions) != 0 {
		t.Fatalf("sessions before any: %+v, want an empty list", empty)
	}
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session: &config.Session{PauseAfter: 2 * time.Second},
	}
	c := e.startWorker(t, cfg)
	job := protocol.Job{RunID: "s-1", Profile: "chat", Input: "hello", Labels: map[string]string{"team": "a"}}
	if err := c.Submit(ctxT(t), job, client.WithSession("s")); err != nil {
		t.Fatal(err)
	}
	paused := func(runs int) {
		testenv.WaitFor(t, 30*time.Second, "session s to pause after its run", func() bool {
			rec, err := c.Session(ctxT(t), "s")
			return err == nil && rec.State == kv.SessionPaused && rec.RunCount == runs
		})
	}
	paused(1)

	for _, tc := range []struct {
		query string
		want  int
	}{{"", 1}, {"?label=team=a", 1}, {"?label=team=b", 0}} {
		var p sessionsPage
		if get(t, e.srv.URL+"/api/sessions"+tc.query, &p); len(p.Sessions) != tc.want {
			t.Fatalf("sessions%s: %+v, want %d", tc.query, p, tc.want)
		}
	}
	if code, body := call(t, "GET", e.srv.URL+"/api/sessions?label=team", ""); code != 400 || !strings.Contains(body, "KEY=VALUE") {
		t.Errorf("sessions with a malformed label: %d %s", code, body)
	}
	var sp sessionPage
	get(t, e.srv.URL+"/api/sessions/s", &sp)
	if s := sp.Session; s.State != kv.SessionPaused || s.Profile != "chat" || s.RunCount != 1 || len(s.Checkpoints) != 1 ||
		s.Head == nil || s.Head.Run != "s-1" || sp.Runs["s-1"].State != "paused" {
		t.Fatalf("session page: %+v", sp)
	}

	send := func(base, msgID string) (int, protocol.SessionSendReply) {
		code, body := call(t, "POST", base+"/api/sessions/s/send?streamJson=1", "again", "X-Baton-Msg-Id", msgID)
		var rep protocol.SessionSendReply
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &rep); err != nil {
				t.Fatalf("send's answer %q: %v", body, err)
			}
		}
		return code, rep
	}
	code, rep := send(e.srv.URL, "page-1")
	if code != 200 || !rep.Started || rep.RunID == "" {
		t.Fatalf("send to a paused session: %d %+v", code, rep)
	}
	if code, again := send(e.srv.URL, "page-1"); code != 200 || again.RunID != rep.RunID {
		t.Fatalf("a retried send: %d %+v, want run %s again", code, again, rep.RunID)
	}
	testenv.WaitFor(t, 30*time.Second, "session s's second run to be live", func() bool {
		rec, err := c.Session(ctxT(t), "s")
		return err == nil && rec.Live == rep.RunID
	})
	if code, body := call(t, "DELETE", e.srv.URL+"/api/sessions/s", ""); code != 409 || !strings.Contains(body, "live run") {
		t.Errorf("delete of a session with a live run: %d %s", code, body)
	}
	paused(2)
	if rec, err := c.Run(ctxT(t), rep.RunID); err != nil || rec.Input != string(client.StreamJSONUserMessage("again")) {
		t.Fatalf("the sent run's input %q (%v), want the stream-json message", rec.Input, err)
	}

	for _, tc := range []struct {
		body, want string
		code       int
	}{
		{`{"as":"s-b","checkpoint":1}`, `"id":"s-b"`, 200},
		{`{"as":"s-b"}`, "exists", 409},
		{`{"as":"s-c","checkpoint":9}`, "checkpoint", 404},
		{`{"as":"no spaces"}`, "new session's id", 400},
		{`not json`, "", 400},
	} {
		if code, body := call(t, "POST", e.srv.URL+"/api/sessions/s/fork", tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("fork %s: %d %s, want %d %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, body := call(t, "DELETE", e.srv.URL+"/api/sessions/s-b", ""); code != 200 {
		t.Errorf("delete of the fork: %d %s", code, body)
	}
	for path, want := range map[string]int{"/api/sessions/s-b": 404, "/api/sessions/bad!id": 400} {
		if code, body := call(t, "GET", e.srv.URL+path, ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}

	ro, err := console.New(t.Context(), e.js, names, console.WithToken(token), console.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	if code, _ := send(roSrv.URL, "page-2"); code != 403 {
		t.Errorf("send on a read-only console: %d", code)
	}
	for _, req := range [][2]string{{"POST", "/api/sessions/s/fork"}, {"DELETE", "/api/sessions/s"}} {
		if code, body := call(t, req[0], roSrv.URL+req[1], `{"as":"s-r"}`); code != 403 {
			t.Errorf("%s %s on a read-only console: %d %s", req[0], req[1], code, body)
		}
	}
	var roPage sessionPage
	if get(t, roSrv.URL+"/api/sessions/s", &roPage); roPage.Session.RunCount != 2 {
		t.Errorf("a read-only console's session page: %+v", roPage)
	}
}
