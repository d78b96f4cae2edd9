package fakeagent_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/fakeagent"
	"github.com/batonhq/baton/internal/testenv"
)

func TestChat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stdin string
		want  []string // substrings of the output's lines, in order
	}{
		{"echo plain and stream-json", "hi\n" + `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"there"}]}}` + "\n",
			[]string{`"subtype":"init"`, `"echo: hi"`, `"type":"result"`, `"echo: there"`, `"type":"result"`}},
		{"approval denied", "approve: rm -rf /\n" + `{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"deny","message":"no"}}}` + "\n",
			[]string{`"subtype":"can_use_tool"`, `"denied: no"`, `"result":"denied: rm -rf /"`}},
		{"approval waits for its own answer", "approve: ls\n" + `{"type":"control_response","response":{"request_id":"other","response":{"behavior":"allow"}}}` + "\n" +
			`{"type":"control_response","response":{"request_id":"req-1","response":{"behavior":"allow"}}}` + "\n",
			[]string{`"can_use_tool"`, `"ran: ls"`}},
		{"interrupt line", "slow\n" + `{"type":"control_request","request_id":"i1","request":{"subtype":"interrupt"}}` + "\n",
			[]string{`"type":"control_response"`, `"terminal_reason":"aborted_streaming"`}},
		{"interrupt withdraws a prompt", "approve: ls\n" + `{"type":"control_request","request_id":"i1","request":{"subtype":"interrupt"}}` + "\n" + "next\n",
			[]string{`"can_use_tool"`, `{"request_id":"req-1","type":"control_cancel_request"}`, `"request_id":"i1"`,
				`[Request interrupted by user for tool use]`, `"terminal_reason":"aborted_tools"`, `"echo: next"`}},
		{"stdin ends while asking", "approve: ls\n", []string{`"can_use_tool"`, `"terminal_reason":"aborted_tools"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := fakeagent.Chat(ctx, strings.NewReader(tc.stdin), &out, nil); err != nil {
				t.Fatal(err)
			}
			rest := out.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %s (in order):\n%s", w, out.String())
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// SIGINT (a value on interrupts) stops a slow turn; the conversation goes on.
func TestChatInterruptedBySignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	interrupts := make(chan struct{}, 1)
	var out testenv.Buffer
	done := make(chan error, 1)
	go func() { done <- fakeagent.Chat(ctx, pr, &out, interrupts) }()
	io.WriteString(pw, "slow\n")
	// The slow turn under way, its progress out (what is asserted below),
	// before the signal: on a loaded machine 250 ms was not always it.
	testenv.WaitFor(t, 5*time.Second, "the slow turn's first progress line", func() bool {
		return strings.Contains(out.String(), `"progress"`)
	})
	interrupts <- struct{}{}
	io.WriteString(pw, "after\n")
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, `"progress"`) || !strings.Contains(s, `"interrupted by a signal"`) || !strings.Contains(s, `"echo: after"`) {
		t.Fatalf("output:\n%s", s)
	}
}
