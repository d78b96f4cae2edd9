package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestCLISessions: a session's turns from the CLI: submit --session
// --watch (a run that pauses exits 0 and names its checkpoint), send
// --session (starts the next run of the paused session), watch --session
// (every run in order), and sessions list, get, fork and delete.
func TestCLISessions(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session: &config.Session{PauseAfter: time.Second},
	}
	e.startWorker(cfg)
	out, errOut, err := e.run("", "submit", "--profile", "chat", "--session", "cs", "--run-id", "cs-1", "--stream-json", "--input", "hello", "--watch")
	if err != nil || !strings.Contains(out, "● paused") || !strings.Contains(out, "session cs: checkpoint cs/cs-1") {
		t.Fatalf("submit --session --watch: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = e.run("", "send", "--session", "cs", "--stream-json", "again")
	if err != nil || !strings.HasPrefix(out, "session cs: started run ") {
		t.Fatalf("send --session to a paused session: %v, %q", err, out)
	}
	out, _, err = e.run("", "watch", "--session", "cs", "--follow=false")
	if err != nil || !testenv.InOrder(out, "── run cs-1 (1 of session cs)", "hello", "● paused", "(2 of session cs)", "again", "● paused") {
		t.Fatalf("watch --session: %v\n%s", err, out)
	}
	if out, _, err := e.run("", "sessions"); err != nil || !strings.Contains(out, "cs ") || !strings.Contains(out, "paused") {
		t.Fatalf("sessions: %v\n%s", err, out)
	}
	if out, _, err := e.run("", "sessions", "get", "cs"); err != nil || !testenv.InOrder(out, "Session:", "cs", "Checkpoints", "cs-1") {
		t.Fatalf("sessions get: %v\n%s", err, out)
	}
	if out, _, err := e.run("", "sessions", "fork", "cs", "--as", "cs-b", "--checkpoint", "1"); err != nil || out != "forked session cs-b from checkpoint 1 of cs\n" {
		t.Fatalf("sessions fork: %v, %q", err, out)
	}
	if out, _, err := e.run("", "sessions", "delete", "cs-b"); err != nil || out != "deleted session cs-b\n" {
		t.Fatalf("sessions delete: %v, %q", err, out)
	}
	if _, _, err := e.run("", "sessions", "get", "cs-b"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("sessions get of a deleted session: %v", err)
	}
}

// TestCLIWatchAGUI: watch --agui prints the run's AG-UI projection, one
// event per line, the bytes client.WatchAGUI's events marshal to;
// --after prints exactly the lines after that position; a session's run
// has the session as threadId; a bad position is refused.
func TestCLIWatchAGUI(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{
		Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"},
		Session: &config.Session{PauseAfter: time.Second},
	}
	e.startWorker(cfg)
	if out, errOut, err := e.run("", "submit", "--profile", "chat", "--session", "ag", "--run-id", "ag-1", "--stream-json", "--input", "hello", "--watch"); err != nil {
		t.Fatalf("submit: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err := e.run("", "watch", "--agui", "ag-1")
	if err != nil {
		t.Fatalf("watch --agui: %v\n%s", err, out)
	}
	var want []string
	c, err := client.New(e.js, protocol.MustNames(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WatchAGUI(t.Context(), "ag-1", func(p agui.Projected) error {
		b, _ := json.Marshal(p.Event)
		want = append(want, p.Pos.String()+" "+string(b))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) || len(want) < 5 {
		t.Fatalf("watch --agui printed %d lines, the projection has %d:\n%s", len(lines), len(want), out)
	}
	for i, l := range lines {
		if _, ev, _ := strings.Cut(want[i], " "); l != ev {
			t.Fatalf("line %d: %s\nwant %s", i, l, ev)
		}
	}
	if !strings.Contains(lines[0], `"type":"RUN_STARTED","threadId":"ag"`) || !strings.Contains(out, "echo: hello") {
		t.Fatalf("watch --agui of a session's run:\n%s", out)
	}
	pos, _, _ := strings.Cut(want[2], " ")
	rest, _, err := e.run("", "watch", "--agui", "ag-1", "--after", pos)
	if err != nil || rest != strings.Join(lines[3:], "\n")+"\n" {
		t.Fatalf("watch --agui --after %s: %v\n%s", pos, err, rest)
	}
	if _, _, err := e.run("", "watch", "--agui", "ag-1", "--after", "3"); err == nil || !strings.Contains(err.Error(), "--after") {
		t.Fatalf("watch --agui --after 3: %v", err)
	}
}
