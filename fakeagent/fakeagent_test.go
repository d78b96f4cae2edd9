package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/journal"
)

// writes records every Write call separately, with its time, so tests can
// check that each line arrives in one write and when.
type writes struct {
	mu    sync.Mutex
	calls [][]byte
	at    []time.Time
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, bytes.Clone(p))
	w.at = append(w.at, time.Now())
	return len(p), nil
}

func (w *writes) all() []byte { return bytes.Join(w.calls, nil) }

func run(t *testing.T, o Options) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), nil, &out, io.Discard, o); err != nil {
		t.Fatalf("Run(%+v): %v", o, err)
	}
	return out.Bytes()
}

// splitLines splits out into lines without their newlines; a last line
// without one is kept.
func splitLines(out []byte) [][]byte {
	lines := bytes.SplitAfter(out, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\n"))
	}
	return lines
}

// event is the subset of the stream's fields the tests check.
type event struct {
	Type      string   `json:"type"`
	Subtype   string   `json:"subtype"`
	SessionID string   `json:"session_id"`
	Model     string   `json:"model"`
	Tools     []string `json:"tools"`
	Cwd       string   `json:"cwd"`
	Prompt    *string  `json:"prompt"`
	Event     struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	Message struct {
		ID      string `json:"id"`
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Text      string          `json:"text"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   *string         `json:"content"`
		} `json:"content"`
	} `json:"message"`
	IsError      *bool    `json:"is_error"`
	NumTurns     int      `json:"num_turns"`
	Result       *string  `json:"result"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	Usage        struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func decode(t *testing.T, line []byte) event {
	t.Helper()
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatalf("line is not valid JSON: %v\n%s", err, line)
	}
	return e
}

func TestDeterministic(t *testing.T) {
	opts := []Options{
		{},
		{Lines: 500, Seed: 42},
		{Lines: 300, Seed: 42, LineSize: 300, RawEvery: 7, ForgeSentinel: true},
		{Lines: 100, Seed: -9, Rate: 100000, PartialLast: true},
	}
	for _, o := range opts {
		a, b := run(t, o), run(t, o)
		if !bytes.Equal(a, b) {
			t.Errorf("%+v: two runs differ", o)
		}
		o2 := o
		o2.Seed++
		if c := run(t, o2); bytes.Equal(a, c) {
			t.Errorf("%+v: seeds %d and %d give the same output", o, o.Seed, o2.Seed)
		}
	}
}

// TestStream checks the shape of a long stream: one write per whole line,
// every line JSON, init first, result last, turns in a plausible order.
func TestStream(t *testing.T) {
	const lines = 2000
	var w writes
	if err := Run(context.Background(), nil, &w, io.Discard, Options{Lines: lines, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	if len(w.calls) != lines+1 {
		t.Fatalf("%d writes, want %d", len(w.calls), lines+1)
	}
	var (
		session    string
		pendingUse = map[string]string{} // tool_use id -> name
		turns      int
		deltas     int
		toolNames  = map[string]int{}
	)
	for i, c := range w.calls {
		if bytes.IndexByte(c, '\n') != len(c)-1 {
			t.Fatalf("write %d is not exactly one line: %q", i, c)
		}
		e := decode(t, c[:len(c)-1])
		switch {
		case i == 0:
			if e.Type != "system" || e.Subtype != "init" || e.SessionID == "" || e.Model == "" || e.Cwd == "" || len(e.Tools) == 0 {
				t.Fatalf("first line is not a complete system/init: %s", c)
			}
			if e.Prompt != nil {
				t.Errorf("prompt present without EchoInput: %s", c)
			}
			session = e.SessionID
			continue
		case i == lines:
			if e.Type != "result" || e.Subtype != "success" || e.IsError == nil || *e.IsError || e.Result == nil || *e.Result == "" || e.TotalCostUSD == nil || *e.TotalCostUSD <= 0 {
				t.Fatalf("last line is not a complete success result: %s", c)
			}
			if e.NumTurns != turns {
				t.Errorf("num_turns = %d, want %d message_start events", e.NumTurns, turns)
			}
			if e.Usage.OutputTokens <= 0 {
				t.Errorf("result usage has no output tokens: %s", c)
			}
			if e.SessionID != session {
				t.Errorf("result session %q, init session %q", e.SessionID, session)
			}
			continue
		}
		switch e.Type {
		case "stream_event":
			switch e.Event.Type {
			case "message_start":
				turns++
			case "content_block_delta":
				deltas++
				if e.Event.Delta.Type != "text_delta" || e.Event.Delta.Text == "" {
					t.Errorf("line %d: empty or odd delta: %s", i+1, c)
				}
			case "content_block_start", "content_block_stop", "message_delta", "message_stop":
			default:
				t.Errorf("line %d: unknown stream event %q", i+1, e.Event.Type)
			}
		case "assistant":
			if e.SessionID != session || e.Message.Role != "assistant" || !strings.HasPrefix(e.Message.ID, "msg_01") {
				t.Errorf("line %d: bad assistant message: %s", i+1, c)
			}
			for _, b := range e.Message.Content {
				if b.Type != "tool_use" {
					continue
				}
				var input map[string]any
				if err := json.Unmarshal(b.Input, &input); err != nil || len(input) == 0 {
					t.Errorf("line %d: tool input is not a JSON object: %s", i+1, b.Input)
				}
				if !strings.HasPrefix(b.ID, "toolu_01") {
					t.Errorf("line %d: tool_use id %q", i+1, b.ID)
				}
				pendingUse[b.ID] = b.Name
				toolNames[b.Name]++
			}
		case "user":
			if len(e.Message.Content) != 1 || e.Message.Content[0].Type != "tool_result" || e.Message.Content[0].Content == nil {
				t.Fatalf("line %d: user message without a tool_result: %s", i+1, c)
			}
			id := e.Message.Content[0].ToolUseID
			if _, ok := pendingUse[id]; !ok {
				t.Errorf("line %d: tool_result for %q, which no earlier tool_use opened", i+1, id)
			}
			delete(pendingUse, id)
		default:
			t.Errorf("line %d: unknown type %q", i+1, e.Type)
		}
	}
	for _, name := range []string{"Bash", "Read", "Edit", "Grep"} {
		if toolNames[name] == 0 {
			t.Errorf("no %s tool_use in %d lines (seen %v)", name, lines, toolNames)
		}
	}
	if deltas < lines/2 {
		t.Errorf("%d text deltas in %d lines; the stream should be mostly deltas", deltas, lines)
	}
}

var forged = regexp.MustCompile(`^\{"__exit":0,"__nonce":"[0-9a-f]{32}","reason":"exit"\}$`)

func TestRawEvery(t *testing.T) {
	for _, tc := range []struct {
		every int
		forge bool
	}{{1, false}, {2, false}, {3, true}, {7, false}, {2, true}} {
		const n = 60
		out := run(t, Options{Lines: n, Seed: 3, RawEvery: tc.every, ForgeSentinel: tc.forge})
		lines := splitLines(out)
		want := n + 1
		if tc.forge {
			want++
		}
		if len(lines) != want {
			t.Fatalf("every %d: %d lines, want %d", tc.every, len(lines), want)
		}
		raw := 0
		for i, l := range lines {
			num := i + 1
			isForged := tc.forge && num == 2
			wantRaw := num != 1 && num != len(lines) && !isForged && num%tc.every == 0
			if gotRaw := !json.Valid(l); gotRaw != wantRaw {
				t.Errorf("every %d: line %d raw = %v, want %v: %s", tc.every, num, gotRaw, wantRaw, l)
			}
			if wantRaw {
				raw++
				if len(l) == 0 || bytes.ContainsAny(l, "\r\n") {
					t.Errorf("every %d: raw line %d is empty or split: %q", tc.every, num, l)
				}
			}
		}
		if raw == 0 {
			t.Errorf("every %d: no raw lines", tc.every)
		}
	}
}

func TestPartialLast(t *testing.T) {
	for _, partial := range []bool{false, true} {
		var w writes
		if err := Run(context.Background(), nil, &w, io.Discard, Options{Lines: 10, PartialLast: partial}); err != nil {
			t.Fatal(err)
		}
		last := w.calls[len(w.calls)-1]
		if ends := bytes.HasSuffix(last, []byte("\n")); ends == partial {
			t.Errorf("PartialLast=%v: last write %q", partial, last)
		}
		if e := decode(t, bytes.TrimSuffix(last, []byte("\n"))); e.Type != "result" {
			t.Errorf("PartialLast=%v: last line is %q, not result", partial, e.Type)
		}
		if n := bytes.Count(w.all(), []byte("\n")); n != 11-boolInt(partial) {
			t.Errorf("PartialLast=%v: %d newlines", partial, n)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestLineSize(t *testing.T) {
	for _, size := range []int{100, 150, 200, 1000, 70000} {
		lines := 400
		if size > 1000 {
			lines = 60 // lines over 64 KiB, as a bufio.Scanner would choke on
		}
		out := run(t, Options{Lines: lines, Seed: 11, LineSize: size})
		var deltas, total, n int
		for _, l := range splitLines(out) {
			n++
			total += len(l) + 1
			if !json.Valid(l) {
				t.Fatalf("size %d: invalid JSON line: %.200s", size, l)
			}
			if !bytes.HasPrefix(l, []byte(deltaPrefix)) {
				continue
			}
			deltas++
			if got := len(l) + 1; math.Abs(float64(got-size)) > 0.2*float64(size) {
				t.Errorf("size %d: delta line of %d bytes: %.200s", size, got, l)
			}
		}
		if deltas < lines/3 {
			t.Errorf("size %d: only %d deltas", size, deltas)
		}
		// Benchmarks read LineSize as the mean line size, at sizes like
		// these: the other events (fixed frames, tool calls) must not move
		// it far. At far larger sizes the unpadded frames pull it down.
		if size >= 200 && size <= 1000 {
			if mean := float64(total) / float64(n); math.Abs(mean-float64(size)) > 0.25*float64(size) {
				t.Errorf("size %d: mean line size %.0f", size, mean)
			}
		}
	}
}

func TestRate(t *testing.T) {
	const lines, rate = 50, 200.0
	var w writes
	start := time.Now()
	if err := Run(context.Background(), nil, &w, io.Discard, Options{Lines: lines, Rate: rate}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// The result is line 51, due 50/200 s = 250 ms after the first.
	if elapsed < 240*time.Millisecond || elapsed > 1500*time.Millisecond {
		t.Errorf("50 lines at 200/s took %v, want about 250ms", elapsed)
	}
	for i, at := range w.at {
		if due := start.Add(time.Duration(float64(i) / rate * float64(time.Second))); at.Before(due.Add(-2 * time.Millisecond)) {
			t.Errorf("line %d written %v before it was due", i+1, due.Sub(at))
		}
	}
}

func TestContextStopsAtLineBoundary(t *testing.T) {
	cause := &ExitError{Signal: "TERM"}
	ctx, cancel := context.WithCancelCause(context.Background())
	var w writes
	cancelled := make(chan time.Time, 1)
	time.AfterFunc(100*time.Millisecond, func() { cancelled <- time.Now(); cancel(cause) })
	start := time.Now()
	err := Run(ctx, nil, &w, io.Discard, Options{Lines: 1000, Rate: 50})
	end := time.Now()
	if !errors.Is(err, cause) {
		t.Fatalf("Run = %v, want the context's cause %v", err, cause)
	}
	if d := end.Sub(<-cancelled); d > time.Second {
		t.Errorf("Run took %v to notice the cancel", d)
	}
	// At 50/s, line n is due (n-1)/50 s after the start.
	if maxLines := 1 + int(end.Sub(start).Seconds()*50); len(w.calls) < 2 || len(w.calls) > maxLines {
		t.Errorf("%d lines written in %v at 50/s", len(w.calls), end.Sub(start))
	}
	for i, c := range w.calls {
		if e := decode(t, bytes.TrimSuffix(c, []byte("\n"))); e.Type == "result" {
			t.Errorf("line %d: a cancelled agent wrote its result", i+1)
		}
	}

	// As fast as possible, too.
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := Run(ctx, nil, io.Discard, io.Discard, Options{Lines: 1 << 30}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a done context = %v", err)
	}
}

func TestDuration(t *testing.T) {
	for _, rate := range []float64{100, 0} {
		const d = 300 * time.Millisecond
		var w writes
		start := time.Now()
		if err := Run(context.Background(), nil, &w, io.Discard, Options{Duration: d, Rate: rate, Lines: 3}); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		if elapsed < d || elapsed > d+time.Second {
			t.Errorf("rate %v: Duration %v took %v", rate, d, elapsed)
		}
		n := len(w.calls)
		if e := decode(t, bytes.TrimSuffix(w.calls[n-1], []byte("\n"))); e.Type != "result" {
			t.Errorf("rate %v: last line %q", rate, e.Type)
		}
		switch {
		case rate > 0 && n != 31: // lines due at 0, 10, ..., 290ms, then the result
			t.Errorf("rate %v: %d lines in %v, want 31", rate, n, d)
		case rate == 0 && n < 100: // thousands when idle; the race detector on a loaded CI machine gets a few hundred
			t.Errorf("rate 0: only %d lines in %v", n, d)
		}
	}

	// However short the duration, the stream starts with init.
	lines := splitLines(run(t, Options{Duration: time.Nanosecond}))
	if len(lines) != 2 || decode(t, lines[0]).Subtype != "init" || decode(t, lines[1]).Type != "result" {
		t.Errorf("1ns duration: %q", lines)
	}
}

func TestForgeSentinel(t *testing.T) {
	nonces := map[string]bool{}
	for seed := range int64(3) {
		lines := splitLines(run(t, Options{Lines: 5, Seed: seed, ForgeSentinel: true}))
		if len(lines) != 7 {
			t.Fatalf("%d lines, want init + forged + 4 + result", len(lines))
		}
		l := lines[1]
		if !forged.Match(l) {
			t.Fatalf("line 2 is not a forged sentinel: %s", l)
		}
		// It must pass for the real thing but for its nonce.
		var s journal.Sentinel
		if err := json.Unmarshal(l, &s); err != nil || s.Exit != 0 || s.Reason != journal.ReasonExit || len(s.Nonce) != 32 {
			t.Fatalf("forged line does not decode as a sentinel: %+v, %v", s, err)
		}
		nonces[s.Nonce] = true
	}
	if len(nonces) != 3 {
		t.Errorf("3 seeds gave %d distinct nonces", len(nonces))
	}
	for _, l := range splitLines(run(t, Options{Lines: 50})) {
		if bytes.Contains(l, []byte("__nonce")) {
			t.Errorf("sentinel-like line without ForgeSentinel: %s", l)
		}
	}
}

func TestEnding(t *testing.T) {
	for _, tc := range []struct {
		o          Options
		want       *ExitError
		subtype    string
		wantStderr string
	}{
		{Options{}, nil, "success", ""},
		{Options{ExitCode: 3, Stderr: "boom"}, &ExitError{Code: 3}, "error_during_execution", "boom\n"},
		{Options{ExitCode: 255, Stderr: "two\nlines\n"}, &ExitError{Code: 255}, "error_during_execution", "two\nlines\n"},
		{Options{Signal: "sigterm"}, &ExitError{Signal: "TERM"}, "error_during_execution", ""},
		{Options{Signal: "9", ExitCode: 2}, &ExitError{Code: 2, Signal: "KILL"}, "error_during_execution", ""},
		{Options{Stderr: "warning only"}, nil, "success", "warning only\n"},
	} {
		var out, stderr bytes.Buffer
		err := Run(context.Background(), nil, &out, &stderr, tc.o)
		var ee *ExitError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%+v: Run = %v, want nil", tc.o, err)
		case tc.want != nil && (!errors.As(err, &ee) || *ee != *tc.want):
			t.Errorf("%+v: Run = %#v, want %#v", tc.o, err, tc.want)
		}
		lines := splitLines(out.Bytes())
		e := decode(t, lines[len(lines)-1])
		if e.Type != "result" || e.Subtype != tc.subtype || e.IsError == nil || *e.IsError != (tc.want != nil) {
			t.Errorf("%+v: result %s", tc.o, lines[len(lines)-1])
		}
		if tc.want != nil && tc.want.Signal != "" && !strings.HasSuffix(*e.Result, "signal "+tc.want.Signal) {
			t.Errorf("%+v: result text %q does not name the signal", tc.o, *e.Result)
		}
		if stderr.String() != tc.wantStderr {
			t.Errorf("%+v: stderr %q, want %q", tc.o, stderr.String(), tc.wantStderr)
		}
	}
	if got := (&ExitError{Code: 3}).Error(); got != "exit status 3" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&ExitError{Signal: "KILL"}).Error(); got != "killed by signal KILL" {
		t.Errorf("Error() = %q", got)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{
		{Lines: -1},
		{LineSize: -1},
		{Rate: -1},
		{Rate: math.NaN()},
		{RawEvery: -2},
		{ExitCode: -1},
		{ExitCode: 256},
		{Duration: -time.Second},
		{Signal: "STOP"},
		{Signal: "bogus"},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), nil, &out, io.Discard, o)
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Run = %v, want ErrInvalidOptions", o, err)
		}
		if out.Len() != 0 {
			t.Errorf("%+v: wrote %q before rejecting the options", o, out.Bytes())
		}
	}
}

// countingReader tells how much of it was read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func prompt(t *testing.T, stdin io.Reader) string {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), stdin, &out, io.Discard, Options{Lines: 2, EchoInput: true}); err != nil {
		t.Fatal(err)
	}
	e := decode(t, splitLines(out.Bytes())[0])
	if e.Prompt == nil {
		t.Fatalf("init has no prompt: %s", out.Bytes())
	}
	return *e.Prompt
}

func TestEchoInput(t *testing.T) {
	long := strings.Repeat("x", MaxPrompt-1) + "é" + strings.Repeat("tail", 2000) // é straddles the cut
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "fix the failing test\n", "fix the failing test\n"},
		{"escapes", "say \"hi\"\\ \t\x01\r\n", "say \"hi\"\\ \t\x01\r\n"},
		{"unicode", "réparer le bogue ✓ 🐛", "réparer le bogue ✓ 🐛"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"empty", "", ""},
		{"long", long, strings.Repeat("x", MaxPrompt-1)},
		{"exactly max", strings.Repeat("y", MaxPrompt), strings.Repeat("y", MaxPrompt)},
	} {
		cr := &countingReader{r: strings.NewReader(tc.in)}
		if got := prompt(t, cr); got != tc.want {
			t.Errorf("%s: prompt %q, want %q", tc.name, trunc(got), trunc(tc.want))
		}
		if cr.n != len(tc.in) {
			t.Errorf("%s: read %d of %d stdin bytes; EchoInput reads it all", tc.name, cr.n, len(tc.in))
		}
	}
	if got := prompt(t, nil); got != "" {
		t.Errorf("nil stdin: prompt %q", got)
	}

	// Without EchoInput stdin is left alone.
	cr := &countingReader{r: strings.NewReader("untouched")}
	if err := Run(context.Background(), cr, io.Discard, io.Discard, Options{Lines: 2}); err != nil || cr.n != 0 {
		t.Errorf("without EchoInput: read %d bytes, err %v", cr.n, err)
	}

	// A failing stdin is an error, not a silent empty prompt.
	errRead := errors.New("read failed")
	err := Run(context.Background(), io.MultiReader(strings.NewReader("x"), errReader{errRead}), io.Discard, io.Discard, Options{EchoInput: true})
	if !errors.Is(err, errRead) {
		t.Errorf("failing stdin: Run = %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func trunc(s string) string {
	if len(s) > 40 {
		return s[:20] + "..." + s[len(s)-20:]
	}
	return s
}

// FuzzEchoInput feeds arbitrary stdin to the init event: the line must stay
// valid JSON and carry the input's valid-UTF-8 prefix.
func FuzzEchoInput(f *testing.F) {
	for _, s := range []string{"", "hello", "\"\\\n\t\x00\x1f", "a\xffb\xc3", "✓🐛", strings.Repeat("é", MaxPrompt)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := Run(context.Background(), bytes.NewReader(in), &out, io.Discard, Options{Lines: 1, EchoInput: true}); err != nil {
			t.Fatal(err)
		}
		line := splitLines(out.Bytes())[0]
		var e struct{ Prompt *string }
		if err := json.Unmarshal(line, &e); err != nil || e.Prompt == nil {
			t.Fatalf("init line invalid or without prompt (%v): %q", err, line)
		}
		p := *e.Prompt
		if !utf8.ValidString(p) || len(p) > MaxPrompt*3 {
			t.Fatalf("prompt invalid or too long: %d bytes", len(p))
		}
		if utf8.Valid(in) && len(in) <= MaxPrompt && p != string(in) {
			t.Fatalf("prompt %q, want %q", p, in)
		}
		if utf8.Valid(in) && len(in) > MaxPrompt && (!strings.HasPrefix(string(in), p) || len(p) < MaxPrompt-3) {
			t.Fatalf("prompt of %d bytes is not a near-%d-byte prefix of the input", len(p), MaxPrompt)
		}
	})
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\`, "\x00\x01\x1f\x7f", "\n\r\t\b\f", "é✓🐛", "\u2028"} {
		enc := `"` + string(appendJSONString(nil, s)) + `"`
		var got string
		if err := json.Unmarshal([]byte(enc), &got); err != nil || got != s {
			t.Errorf("%q encodes as %s, which decodes to %q (%v)", s, enc, got, err)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("fake-agent", pflag.ContinueOnError)
	o.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if want := (Options{Lines: DefaultLines}); o != want {
		t.Errorf("defaults %+v, want %+v", o, want)
	}

	o = Options{}
	fs = pflag.NewFlagSet("fake-agent", pflag.ContinueOnError)
	o.RegisterFlags(fs)
	err := fs.Parse([]string{
		"--lines", "7", "--line-size", "200", "--rate", "2.5", "--seed", "-3",
		"--raw-every", "4", "--partial-last", "--exit-code", "3", "--signal", "KILL",
		"--stderr", "boom", "--echo-input", "--forge-sentinel", "--duration", "1m30s",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Lines: 7, LineSize: 200, Rate: 2.5, Seed: -3, RawEvery: 4, PartialLast: true,
		ExitCode: 3, Signal: "KILL", Stderr: "boom", EchoInput: true, ForgeSentinel: true,
		Duration: 90 * time.Second,
	}
	if o != want {
		t.Errorf("parsed %+v\nwant   %+v", o, want)
	}
}

// TestNoPerLineAllocations keeps fast mode fast: allocations must not grow
// with the number of lines.
func TestNoPerLineAllocations(t *testing.T) {
	allocs := func(lines int) float64 {
		return testing.AllocsPerRun(3, func() {
			if err := Run(context.Background(), nil, io.Discard, io.Discard, Options{Lines: lines, LineSize: 200, RawEvery: 9}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(100), allocs(10000)
	if large > small+5 {
		t.Errorf("%v allocations for 100 lines, %v for 10000: something allocates per line", small, large)
	}
}

// BenchmarkRun measures fast mode: lines of 200 bytes, one write each, to
// io.Discard and to /dev/null (a real write syscall per line).
func BenchmarkRun(b *testing.B) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devNull.Close()
	for _, bc := range []struct {
		name string
		w    io.Writer
	}{{"discard", io.Discard}, {"devnull", devNull}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(200)
			b.ReportAllocs()
			start := time.Now()
			if err := Run(context.Background(), nil, bc.w, io.Discard, Options{Lines: b.N, LineSize: 200}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lines/s")
		})
	}
}

// TestStory: the story is told once, in order, and each message's text
// deltas join into exactly the text its assistant line carries, a whole
// sentence or more: read, run the failing test, search, edit, run the
// suite, a closing message without a tool, the result.
func TestStory(t *testing.T) {
	lines := splitLines(run(t, Options{Story: true, Lines: 3, Seed: 9}))
	if e := decode(t, lines[0]); e.Subtype != "init" {
		t.Fatalf("line 1: %s", lines[0])
	}
	if e := decode(t, lines[len(lines)-1]); e.Type != "result" {
		t.Fatalf("last line: %s", lines[len(lines)-1])
	}
	tools, texts, results := turnsOf(t, lines)
	if len(results) != 1 {
		t.Errorf("%d results, want 1", len(results))
	}
	if want := []string{"Read", "Bash", "Grep", "Edit", "Bash"}; !slices.Equal(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	if len(texts) != 6 || !strings.HasPrefix(texts[0], "I'll start by reading") || !strings.Contains(texts[5], "failure is gone") {
		t.Errorf("the story is not told in order: %q", texts)
	}
	if _, err := (Options{Story: true, Duration: time.Second}).validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("story with a duration: %v", err)
	}
}

// TestBurn: --burn spends the CPU time asked, as the process's clock
// counts it.
func TestBurn(t *testing.T) {
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	if err := Run(context.Background(), strings.NewReader(""), io.Discard, io.Discard, Options{Lines: 1, Burn: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	used := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	if used < 200*time.Millisecond || used > 400*time.Millisecond {
		t.Errorf("burned %v of CPU, want 200ms", used)
	}
}
