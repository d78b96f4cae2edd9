package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
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
