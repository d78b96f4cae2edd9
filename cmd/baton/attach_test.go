package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
)

// submit --interactive: each line of stdin is a turn of the conversation,
// and the end of stdin ends it; the run succeeds.
func TestSubmitInteractive(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream}
	e.startWorker(cfg)
	out, errOut, err := e.run("second turn\nthird turn\n", "submit", "--profile", "chat", "--interactive", "--stream-json", "--input", "first turn")
	if err != nil {
		t.Fatalf("submit --interactive: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	// The job's input is the first turn, as in submit --watch.
	if !strings.HasPrefix(out, "run-") || !strings.Contains(out, "\nyou › first turn\n● started") {
		t.Fatalf("output lacks the job's input, first:\n%s", out)
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

// TestAttachAnswersPermissionPrompts: attach shows a permission prompt as
// one line and answers it with a typed y or n, which the agent acts on. A
// prompt an interrupt withdrew is shown so, and a y typed then is a message
// like any other, not the answer to a prompt nobody waits on.
func TestAttachAnswersPermissionPrompts(t *testing.T) {
	e := newCLIEnv(t)
	cfg := config.Default()
	cfg.Profiles["chat"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: time.Minute,
		Stdin: config.StdinStream, Interrupt: config.Interrupt{Line: `{"type":"control_request","request_id":"baton-interrupt","request":{"subtype":"interrupt"}}`}}
	e.startWorker(cfg)
	in, typed := io.Pipe()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, errOut, done := e.start(ctx, in, "submit", "--profile", "chat", "--interactive", "--stream-json", "--input", "approve: make test")
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
	shows("? Bash asks: make test  (y: allow, n [why]: deny)\n")
	typeLine("y")
	shows("you › allow req-1\n")
	shows("■ done")
	typeLine("approve: rm -rf /")
	shows("? Bash asks: rm -rf /  (y: allow, n [why]: deny)\n")
	typeLine("n too risky")
	shows("you › deny req-2: too risky\n")
	typeLine("y") // no prompt waits: a message like any other
	shows("echo: y")
	typeLine("approve: make deploy")
	shows("? Bash asks: make deploy  (y: allow, n [why]: deny)\n")
	runID, _, _ := strings.Cut(out.String(), "\n") // submit prints it first
	if _, errOut, err := e.run("", "interrupt", runID); err != nil {
		t.Fatalf("interrupt %s: %v %s", runID, err, errOut)
	}
	shows("? request req-4 withdrawn: the agent no longer waits for its answer\n")
	shows("↳ [Request interrupted by user for tool use]\n")
	typeLine("yes")
	shows("echo: yes")
	typed.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("attach did not end 30 s after the end of its input:\n%s", out.String())
	}
	o := out.String()
	for _, want := range []string{"← result", "← error", "● succeeded"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
}
