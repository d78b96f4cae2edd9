package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

// aguiEvents reads a whole AG-UI response (it ends at the run's or the
// turn's end): each event's id and data, failing on any named event.
func aguiEvents(t *testing.T, method, u, body string, header ...string) []sseEvent {
	t.Helper()
	code, text := call(t, method, u, body, header...)
	if code != 200 {
		t.Fatalf("%s %s: %d %s", method, u, code, text)
	}
	evs, end := readEvents(t, strings.NewReader(text), -1)
	if end != "" {
		t.Fatalf("%s %s: an event named %q in an AG-UI stream", method, u, end)
	}
	return evs
}

func eventType(t *testing.T, e sseEvent) agui.Event {
	t.Helper()
	var ev agui.Event
	if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.Type == "" {
		t.Fatalf("event %s is no AG-UI event: %q (%v)", e.id, e.data, err)
	}
	return ev
}

// TestAGUIStream: a finished run's AG-UI stream is client.WatchAGUI's
// projection, byte for byte, with positions as ids, from RUN_STARTED to
// RUN_FINISHED; resumed with Last-Event-ID (or ?after=) at any of its
// events it gives exactly the events after it; a join (GET ?runId=) gives
// the same; a malformed resume point or no token is refused.
func TestAGUIStream(t *testing.T) {
	e := setup(t)
	cfg := config.Default()
	cfg.Profiles["story"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--story", "--seed", "5"}, Timeout: time.Minute}
	c := e.startWorker(t, cfg)
	job := protocol.Job{RunID: "ag-1", Profile: "story", Input: "tell it"}
	if err := c.Submit(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	var want []agui.Projected
	st, err := c.WatchAGUI(ctxT(t), "ag-1", func(p agui.Projected) error { want = append(want, p); return nil })
	if err != nil || st.Status != protocol.StatusSucceeded {
		t.Fatalf("WatchAGUI: %+v %v", st, err)
	}
	got := aguiEvents(t, "GET", e.srv.URL+"/api/runs/ag-1/agui", "")
	if len(got) != len(want) || len(want) < 10 {
		t.Fatalf("the endpoint gave %d events, WatchAGUI %d (want over 10)", len(got), len(want))
	}
	tools := 0
	for i, p := range want {
		b, _ := json.Marshal(p.Event)
		if got[i].id != p.Pos.String() || got[i].data != string(b) {
			t.Fatalf("event %d: %s %s, want %s %s", i, got[i].id, got[i].data, p.Pos, b)
		}
		if p.Event.Type == agui.ToolCallResult {
			tools++
		}
	}
	if first, last := eventType(t, got[0]), eventType(t, got[len(got)-1]); first.Type != agui.RunStarted || last.Type != agui.RunFinished || tools == 0 {
		t.Fatalf("stream from %s to %s with %d tool results, want RUN_STARTED to RUN_FINISHED with tool calls", first.Type, last.Type, tools)
	}
	for k := range got {
		if k%3 != 0 && k != len(got)-1 {
			continue // every third, and the last, keeps the test quick
		}
		rest := aguiEvents(t, "GET", e.srv.URL+"/api/runs/ag-1/agui", "", "Last-Event-ID", got[k].id)
		if fmt.Sprint(rest) != fmt.Sprint(got[k+1:]) {
			t.Fatalf("resumed after %s: %d events, want the %d after it", got[k].id, len(rest), len(got)-k-1)
		}
	}
	if rest := aguiEvents(t, "GET", e.srv.URL+"/api/runs/ag-1/agui?after="+got[4].id, ""); fmt.Sprint(rest) != fmt.Sprint(got[5:]) {
		t.Fatalf("?after=%s gave %d events, want %d", got[4].id, len(rest), len(got)-5)
	}
	if join := aguiEvents(t, "GET", e.srv.URL+"/api/agui?runId=ag-1&offset=-1", ""); fmt.Sprint(join) != fmt.Sprint(got) {
		t.Fatalf("a join gave %d events, want the run's %d", len(join), len(got))
	}
	for _, tc := range []struct{ u, last string }{{"/api/runs/ag-1/agui", "12"}, {"/api/runs/ag-1/agui?after=x:1", ""}, {"/api/agui?runId=bad!id", ""}} {
		if code, body := call(t, "GET", e.srv.URL+tc.u, "", "Last-Event-ID", tc.last); code != 400 {
			t.Errorf("GET %s (Last-Event-ID %q): %d %s, want 400", tc.u, tc.last, code, body)
		}
	}
	resp, err := http.Get(e.srv.URL + "/api/runs/ag-1/agui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
}

// TestAGUIRunTurns: POST /api/agui with an AG-UI RunAgentInput starts a
// session on its threadId (with forwardedProps' profile) and answers with
// the first turn; a retried request starts nothing again and gives the
// same events; the thread's next message goes to its live run, and the
// answer is that turn alone; a retry with Last-Event-ID resumes exactly
// after it; bad requests get 400.
func TestAGUIRunTurns(t *testing.T) {
	e := setup(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session: &config.Session{PauseAfter: time.Minute},
	}
	c := e.startWorker(t, cfg)
	input := func(runID string, texts ...string) string {
		var msgs []map[string]any
		for i, s := range texts {
			msgs = append(msgs, map[string]any{"id": fmt.Sprint("m", i), "role": "user", "content": s})
			msgs = append(msgs, map[string]any{"id": fmt.Sprint("a", i), "role": "assistant", "content": "an answer"})
		}
		b, _ := json.Marshal(map[string]any{"threadId": "thread-1", "runId": runID, "messages": msgs[:len(msgs)-1],
			"state": map[string]any{}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{"profile": "chat", "input": "stream-json"}})
		return string(b)
	}
	turn := func(evs []sseEvent, say, notSay string) string {
		t.Helper()
		if len(evs) < 3 {
			t.Fatalf("a turn of %d events", len(evs))
		}
		run, _, _ := strings.Cut(evs[0].id, "/")
		var text strings.Builder
		for i, ev := range evs {
			e := eventType(t, ev)
			if r, _, _ := strings.Cut(ev.id, "/"); r != run {
				t.Fatalf("event %s of another run than %s", ev.id, run)
			}
			switch {
			case i == 0 && e.Type != agui.RunStarted, i == len(evs)-1 && e.Type != agui.RunFinished:
				t.Fatalf("a turn from %s to %s", eventType(t, evs[0]).Type, eventType(t, evs[len(evs)-1]).Type)
			case e.Role == "user":
				t.Fatalf("the turn echoes the user's message: %s", ev.data)
			case e.Type == agui.TextMessageContent:
				text.WriteString(e.Delta)
			}
		}
		if !strings.Contains(text.String(), say) || notSay != "" && strings.Contains(text.String(), notSay) {
			t.Fatalf("the turn says %q, want %q and not %q", text.String(), say, notSay)
		}
		return run
	}
	first := aguiEvents(t, "POST", e.srv.URL+"/api/agui", input("r1", "hello"))
	run := turn(first, "echo: hello", "")
	if again := aguiEvents(t, "POST", e.srv.URL+"/api/agui", input("r1", "hello")); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("a retried request gave %d other events", len(again))
	}
	second := aguiEvents(t, "POST", e.srv.URL+"/api/agui", input("r2", "hello", "again"))
	if turn(second, "echo: again", "echo: hello") != run {
		t.Fatalf("the second message went to another run than the live %s", run)
	}
	rec, err := c.Session(ctxT(t), "thread-1")
	if err != nil || rec.RunCount != 1 || rec.Live != run {
		t.Fatalf("session thread-1: %+v %v, want one run, %s, live", rec, err, run)
	}
	for k := range second[:len(second)-1] {
		rest := aguiEvents(t, "POST", e.srv.URL+"/api/agui", input("r2", "hello", "again"), "Last-Event-ID", second[k].id)
		if fmt.Sprint(rest) != fmt.Sprint(second[k+1:]) {
			t.Fatalf("resumed after %s: %d events, want the %d after it", second[k].id, len(rest), len(second)-k-1)
		}
	}
	for _, tc := range []struct{ name, body, last, want string }{
		{"not json", "{", "", "RunAgentInput"},
		{"no thread", `{"runId":"x","messages":[{"role":"user","content":"hi"}]}`, "", "threadId"},
		{"no runId", `{"threadId":"thread-1","messages":[{"role":"user","content":"hi"}]}`, "", "runId"},
		{"no user message", `{"threadId":"thread-1","runId":"x","messages":[]}`, "", "user message"},
		{"a new thread without a profile", `{"threadId":"thread-2","runId":"x","messages":[{"role":"user","content":"hi"}]}`, "", "profile"},
		{"an unknown input format", `{"threadId":"thread-1","runId":"x","messages":[{"role":"user","content":"hi"}],"forwardedProps":{"input":"xml"}}`, "", "input"},
		{"a malformed Last-Event-ID", input("r2", "x"), "12:0", "Last-Event-ID"},
		{"another thread's run", strings.Replace(input("r2", "x"), "thread-1", "thread-3", 1), second[0].id, "not of thread"},
	} {
		if code, body := call(t, "POST", e.srv.URL+"/api/agui", tc.body, "Last-Event-ID", tc.last); code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.name, code, body, tc.want)
		}
	}
}
