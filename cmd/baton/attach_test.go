package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/worker"
)

// submit --interactive: each line of stdin is a turn of the conversation,
// and the end of stdin ends it; the run succeeds.
func TestSubmitInteractive(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream}
	startWorkerWith(t, e.js, cfg, worker.WithStateDir(testenv.StateDir(t)), worker.WithBinary(testenv.BatonBinary(t)))
	out, errOut, err := e.run("second turn\nthird turn\n", "submit", "--profile", "chat", "--interactive", "--stream-json", "--input", "first turn")
	if err != nil {
		t.Fatalf("submit --interactive: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	// The inputs may reach the agent before it answers the first turn.
	if !strings.Contains(out, "you › second turn\n") {
		t.Fatalf("output lacks the second turn's input:\n%s", out)
	}
	rest := out
	for _, want := range []string{"echo: first turn", "echo: second turn", "echo: third turn", "succeeded"} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("output lacks %q (in order):\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
}
