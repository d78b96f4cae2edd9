package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// dropper cuts the first AG-UI response of each of its threads after a
// few events, as a dropped connection would, and counts the requests
// that resume with Last-Event-ID.
type dropper struct {
	next    http.Handler
	mu      sync.Mutex
	drop    map[string]bool // thread → its first response is still to cut
	resumed map[string]int
}

func (d *dropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != "POST" || r.URL.Path != "/api/agui" {
		d.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var in struct{ ThreadID string }
	_ = json.Unmarshal(body, &in)
	d.mu.Lock()
	cut := d.drop[in.ThreadID]
	d.drop[in.ThreadID] = false
	if r.Header.Get("Last-Event-ID") != "" {
		d.resumed[in.ThreadID]++
	}
	d.mu.Unlock()
	if cut {
		w = &cutWriter{ResponseWriter: w, events: 3}
	}
	d.next.ServeHTTP(w, r)
}

// cutWriter aborts the response once it has written events events.
type cutWriter struct {
	http.ResponseWriter
	events int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.events <= 0 {
		panic(http.ErrAbortHandler) // the connection drops, no clean end
	}
	c.events -= bytes.Count(b, []byte("\n\n"))
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// clientsRunner runs testdata/agui-clients/clients.mjs (installed in dir)
// with args against the console at url, and returns what it printed.
func clientsRunner(t *testing.T, dir, node, url string) func(args ...string) []byte {
	return func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"clients.mjs"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BATON_URL="+url, "BATON_TOKEN="+token, "SUPPRESS_TRANSFORMATION_WARNINGS=true")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("clients.mjs %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return out
	}
}

// TestAGUIClients runs the official clients against the console
// (testdata/agui-clients/clients.mjs): @tanstack/ai-client's ChatClient
// and @ag-ui/client's HttpAgent each hold a two-turn conversation on a
// session of an interactive agent, and one with tool calls, and get the
// agent's text and tool calls as messages; each has its first response
// cut after three events (TanStack resumes it with Last-Event-ID, the
// HttpAgent runs its runId again), and the sessions got each message
// once. Every event of their runs parses with @ag-ui/core's EventSchema.
func TestAGUIClients(t *testing.T) {
	dir, node := testenv.NPMInstall(t, filepath.Join("testdata", "agui-clients"), "BATON_AGUI_CLIENTS_NPM_DIR", "clients.mjs")
	e := setup(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session: &config.Session{PauseAfter: time.Minute},
	}
	cfg.Profiles["story"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--story", "--seed", "9"}, Timeout: time.Minute, Session: &config.Session{}}
	c := e.startWorker(t, cfg)
	con, err := console.New(t.Context(), e.js, names, console.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{next: con, drop: map[string]bool{"tan-chat": true, "agui-chat": true, "tan-tools": true}, resumed: map[string]int{}}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)

	run := clientsRunner(t, dir, node, srv.URL)
	var got struct {
		TanstackChat, TanstackTools []json.RawMessage
		AguiChat, AguiTools         struct {
			Retries  int
			Messages []json.RawMessage
		}
	}
	out := run()
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("clients.mjs printed %q: %v", out, err)
	}
	// Each conversation, message by message: the role and what it holds.
	expect := func(name string, msgs []json.RawMessage, want ...[]string) {
		t.Helper()
		if len(msgs) != len(want) {
			t.Fatalf("%s: %d messages, want %d:\n%s", name, len(msgs), len(want), msgs)
		}
		for i, w := range want {
			for _, s := range w {
				if !strings.Contains(string(msgs[i]), s) {
					t.Errorf("%s: message %d %s holds no %s", name, i, msgs[i], s)
				}
			}
		}
	}
	user := func(s string) []string { return []string{`"role":"user"`, s} }
	expect("TanStack chat", got.TanstackChat, user("hello"), []string{`"role":"assistant"`, "echo: hello"}, user("again"), []string{`"role":"assistant"`, "echo: again"})
	// The story agent's turn: assistant messages of text and a tool call
	// each, every call with its result, the same for both messages.
	var roles []string
	calls, results := 0, 0
	for _, m := range got.TanstackTools {
		var msg struct{ Role string }
		_ = json.Unmarshal(m, &msg)
		roles = append(roles, msg.Role)
		calls += strings.Count(string(m), `"type":"tool-call"`)
		results += strings.Count(string(m), `"type":"tool-result"`)
	}
	half := len(roles) / 2
	if len(roles) < 6 || roles[0] != "user" || roles[half] != "user" || strings.Join(roles[:half], " ") != strings.Join(roles[half:], " ") ||
		strings.Count(strings.Join(roles, " "), "user") != 2 || calls < 8 || calls != results {
		t.Errorf("TanStack tools: roles %v, %d tool calls, %d results:\n%s", roles, calls, results, got.TanstackTools)
	}
	if !strings.Contains(string(got.TanstackTools[0]), "tell it") || !strings.Contains(string(got.TanstackTools[half]), "once more") ||
		!strings.Contains(string(got.TanstackTools[len(roles)-1]), "Every test passes") {
		t.Errorf("TanStack tools: the messages are not the conversation's:\n%s", got.TanstackTools)
	}
	expect("AG-UI chat", got.AguiChat.Messages, user("hello"), []string{`"role":"assistant"`, "echo: hello"}, user("again"), []string{`"role":"assistant"`, "echo: again"})
	if got.AguiChat.Retries != 1 {
		t.Errorf("the HttpAgent ran again %d times, want once (its first response was cut)", got.AguiChat.Retries)
	}
	if tools := fmt.Sprintf("%s", got.AguiTools.Messages); !strings.Contains(tools, `"toolCalls"`) || !strings.Contains(tools, `"role":"tool"`) {
		t.Errorf("AG-UI tools: no tool calls with results in %s", got.AguiTools.Messages)
	}
	d.mu.Lock()
	if d.resumed["tan-chat"] == 0 || d.resumed["tan-tools"] == 0 {
		t.Errorf("TanStack's client resumed %v, want its cut responses resumed with Last-Event-ID", d.resumed)
	}
	d.mu.Unlock()

	// Each message reached its session once: one run of the interactive
	// agent took both, the other agent ran once per message.
	var runs []string
	for thread, want := range map[string]int{"tan-chat": 1, "tan-tools": 2, "agui-chat": 1, "agui-tools": 1} {
		rec, err := c.Session(ctxT(t), thread)
		if err != nil || rec.RunCount != want {
			t.Fatalf("session %s: %+v %v, want %d runs", thread, rec, err, want)
		}
		runs = append(runs, rec.Runs...)
	}
	// The interactive runs got the second message once, and answered it
	// once: their chains, once they are cancelled, say so.
	for _, thread := range []string{"tan-chat", "agui-chat"} {
		rec, _ := c.Session(ctxT(t), thread)
		if _, err := c.Cancel(ctxT(t), rec.Runs[0]); err != nil {
			t.Fatal(err)
		}
		var inputs, answers int
		if _, err := c.Watch(ctxT(t), rec.Runs[0], func(ev client.Event) error {
			if ev.Kind == protocol.KindInput {
				inputs++
			}
			if ev.Kind == protocol.KindEvents && bytes.Contains(ev.Data, []byte(`"result":"echo: again"`)) {
				answers++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if inputs != 1 || answers != 1 {
			t.Errorf("session %s's run %s got %d inputs and answered %d times, want 1 and 1", thread, rec.Runs[0], inputs, answers)
		}
	}
	var checked struct{ Events int }
	if err := json.Unmarshal(run(append([]string{"schemas"}, runs...)...), &checked); err != nil || checked.Events < 20 {
		t.Fatalf("@ag-ui/core checked %d events (%v)", checked.Events, err)
	}
}
