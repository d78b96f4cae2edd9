package fakeagent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// turnsOf reads a stream's lines: the tools called, each assistant message
// (checked to be the sum of its text deltas, ending a sentence) and each
// result's text.
func turnsOf(t *testing.T, lines [][]byte) (tools, texts, results []string) {
	t.Helper()
	var text strings.Builder
	for i, l := range lines {
		e := decode(t, l)
		switch {
		case e.Type == "stream_event" && e.Event.Type == "content_block_delta":
			text.WriteString(e.Event.Delta.Text)
		case e.Type == "assistant":
			var said string
			for _, b := range e.Message.Content {
				switch b.Type {
				case "text":
					said = b.Text
				case "tool_use":
					tools = append(tools, b.Name)
				}
			}
			if said != text.String() {
				t.Errorf("line %d: deltas say %q, the message %q", i+1, text.String(), said)
			}
			if !strings.HasSuffix(said, ".") {
				t.Errorf("line %d: the message ends mid-sentence: %q", i+1, said)
			}
			texts = append(texts, said)
			text.Reset()
		case e.Type == "result":
			if e.IsError == nil || *e.IsError || e.Result == nil {
				t.Errorf("line %d: result is not a success: %s", i+1, l)
			} else {
				results = append(results, *e.Result)
			}
		}
	}
	return tools, texts, results
}

// TestFollowUp: the story's result, then, once the second message comes,
// a second turn that adds a regression test and ends in a second result;
// the prompt is the first stdin line's text.
func TestFollowUp(t *testing.T) {
	in, inW := io.Pipe()
	out, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), in, outW, io.Discard, Options{Story: true, FollowUp: true, EchoInput: true, Seed: 3})
		outW.Close()
	}()
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		close(lines)
	}()
	next := func() ([]byte, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(10 * time.Second):
			t.Fatal("no line from the fake agent in 10s")
			return nil, false
		}
	}
	send := func(s string) {
		t.Helper()
		w := make(chan error, 1)
		go func() { _, err := io.WriteString(inW, s); w <- err }()
		select {
		case err := <-w:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the fake agent did not read %q in 10s", s)
		}
	}

	send(`{"type":"user","message":{"role":"user","content":"Fix the upload handler."},"parent_tool_use_id":null,"session_id":"default"}` + "\n")
	var all [][]byte
	for {
		l, ok := next()
		if !ok {
			t.Fatalf("the agent ended before its first result: %v", <-done)
		}
		all = append(all, l)
		if decode(t, l).Type == "result" {
			break
		}
	}
	if p := decode(t, all[0]).Prompt; p == nil || *p != "Fix the upload handler." {
		t.Errorf("init prompt = %v, want the first message's text", p)
	}
	// The agent now waits for the follow-up: nothing comes before it.
	select {
	case l := <-lines:
		t.Fatalf("a line before the follow-up: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	first := len(all)
	send("Add a regression test for the malformed body.\n") // plain text works too
	for {
		l, ok := next()
		if !ok {
			break
		}
		all = append(all, l)
		if decode(t, l).Type == "result" {
			// The agent lives until stdin ends.
			select {
			case err := <-done:
				t.Fatalf("the agent ended before stdin did: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			inW.Close()
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	tools, texts, results := turnsOf(t, all[first:])
	if want := []string{"Edit", "Bash"}; !slices.Equal(tools, want) {
		t.Errorf("second turn's tools %v, want %v", tools, want)
	}
	if len(texts) != 3 || !strings.Contains(texts[0], "test of its own") || !strings.Contains(texts[2], "TestHandleUploadMalformedBody") {
		t.Errorf("the second turn is not told in order: %q", texts)
	}
	if len(results) != 1 || !strings.Contains(results[0], "TestHandleUploadMalformedBody") {
		t.Errorf("second turn's results %q", results)
	}
	_, _, results = turnsOf(t, all)
	if len(results) != 2 {
		t.Errorf("%d result lines, want 2", len(results))
	}
}

// TestFollowUpNone: stdin ending after the prompt ends the session after
// its first turn, with one result.
func TestFollowUpNone(t *testing.T) {
	var out strings.Builder
	if err := Run(context.Background(), strings.NewReader("fix it\n"), &out, io.Discard, Options{Story: true, FollowUp: true}); err != nil {
		t.Fatal(err)
	}
	tools, _, results := turnsOf(t, splitLines([]byte(out.String())))
	if len(results) != 1 || len(tools) != 5 {
		t.Errorf("results %q, tools %v: want the story alone", results, tools)
	}
	for _, o := range []Options{{FollowUp: true}, {Story: true, FollowUp: true, ExitCode: 1}} {
		if _, err := o.validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}
