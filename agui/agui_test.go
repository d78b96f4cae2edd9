package agui_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden .agui.ndjson files from the projection")

// fixture is an entry of testdata/fixtures.json: a chain (NAME.chain.ndjson)
// and the options it is projected with; NAME.agui.ndjson holds its events.
type fixture struct {
	Name       string `json:"name"`
	RunID      string `json:"runId"`
	Dialect    string `json:"dialect"`
	ThreadID   string `json:"threadId"`
	JobInput   string `json:"jobInput"`
	Provenance string `json:"provenance"`
}

func (f fixture) options() []agui.Option {
	opts := []agui.Option{agui.WithDialect(agui.Dialect(f.Dialect))}
	if f.ThreadID != "" {
		opts = append(opts, agui.WithThreadID(f.ThreadID))
	}
	if f.JobInput != "" {
		opts = append(opts, agui.WithJobInput([]byte(f.JobInput)))
	}
	return opts
}

func fixtures(t testing.TB) []fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fs []fixture
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatalf("testdata/fixtures.json: %v", err)
	}
	return fs
}

// chainLine is a line of a .chain.ndjson file: one chain message.
type chainLine struct {
	Seq     uint64            `json:"seq"`
	Kind    string            `json:"kind"`
	Headers map[string]string `json:"headers"`
	Time    time.Time         `json:"time"`
	Data    string            `json:"data"`
}

func chain(t testing.TB, name string) []agui.Message {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".chain.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msgs []agui.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l chainLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s.chain.ndjson: %v", name, err)
		}
		h := map[string][]string{}
		for k, v := range l.Headers {
			h[k] = []string{v}
		}
		msgs = append(msgs, agui.Message{Kind: protocol.RunKind(l.Kind), Seq: l.Seq, Header: h, Data: []byte(l.Data), Time: l.Time})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func project(p *agui.Projector, msgs []agui.Message) []agui.Projected {
	var out []agui.Projected
	for _, m := range msgs {
		out = append(out, p.Project(m)...)
	}
	return out
}

// golden renders events as a .agui.ndjson file: per line, the event's
// position (an SSE id) and the event.
func golden(t testing.TB, evs []agui.Projected) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range evs {
		line, err := json.Marshal(struct {
			ID    string     `json:"id"`
			Event agui.Event `json:"event"`
		}{e.Pos.String(), e.Event})
		if err != nil {
			t.Fatalf("event at %s does not marshal: %v", e.Pos, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestGolden projects each fixture's chain and compares the events with
// its golden file (go test ./agui -run TestGolden -update rewrites them),
// and checks that they form a valid AG-UI stream.
func TestGolden(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			evs := project(agui.New(f.RunID, f.options()...), chain(t, f.Name))
			if err := checkStream(evs, true); err != nil {
				t.Fatal(err)
			}
			got := golden(t, evs)
			path := filepath.Join("testdata", f.Name+".agui.ndjson")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./agui -run TestGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
				for i := range max(len(gl), len(wl)) {
					var g, w []byte
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if !bytes.Equal(g, w) {
						t.Fatalf("%s line %d:\n got %s\nwant %s", path, i+1, g, w)
					}
				}
			}
		})
	}
}

// TestDeterministic: a second projection of the same chain is the same,
// bytes and all.
func TestDeterministic(t *testing.T) {
	for _, f := range fixtures(t) {
		msgs := chain(t, f.Name)
		a := golden(t, project(agui.New(f.RunID, f.options()...), msgs))
		b := golden(t, project(agui.New(f.RunID, f.options()...), msgs))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two projections differ", f.Name)
		}
	}
}

// TestResume resumes each fixture's projection after each of its events,
// both ways the package documents, and after positions between and
// around them: the events are exactly the uninterrupted projection's
// tail.
func TestResume(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			msgs := chain(t, f.Name)
			full := project(agui.New(f.RunID, f.options()...), msgs)
			// The state after each message, to restore from.
			states := make([][]byte, len(msgs))
			p := agui.New(f.RunID, f.options()...)
			for i, m := range msgs {
				p.Project(m)
				states[i] = p.State()
			}
			points := []agui.Position{{}, {Seq: msgs[len(msgs)-1].Seq, Index: 1 << 20}}
			for _, e := range full {
				points = append(points, e.Pos, agui.Position{Seq: e.Pos.Seq - 1, Index: 1 << 20})
			}
			for _, at := range points {
				var want []agui.Projected
				for _, e := range full {
					if at.Less(e.Pos) {
						want = append(want, e)
					}
				}
				opts := append(f.options(), agui.After(at))
				replayed := project(agui.New(f.RunID, opts...), msgs)
				if !bytes.Equal(golden(t, replayed), golden(t, want)) {
					t.Fatalf("replayed after %s: %d events, want %d", at, len(replayed), len(want))
				}
				// Carried: the state after the last message before at's.
				k := 0
				for k < len(msgs) && msgs[k].Seq < at.Seq {
					k++
				}
				q := agui.New(f.RunID, opts...)
				if k > 0 {
					if err := q.Restore(states[k-1]); err != nil {
						t.Fatal(err)
					}
				}
				carried := project(q, msgs[k:])
				if !bytes.Equal(golden(t, carried), golden(t, want)) {
					t.Fatalf("restored before seq %d, after %s: %d events, want %d", at.Seq, at, len(carried), len(want))
				}
			}
		})
	}
}

// checkStream checks what @ag-ui/client's verifier checks of a stream,
// and what the package promises beyond it: every event marshals, ids are
// unique, every tool call has its result within its run; and, when the
// chain ended, that the stream ends with its run.
func checkStream(evs []agui.Projected, ended bool) error {
	var (
		inRun, finished, errored bool
		texts, spans, reasoning  = map[string]bool{}, map[string]bool{}, map[string]bool{}
		tools, unanswered        = map[string]bool{}, map[string]bool{}
		ids                      = map[string]bool{}
		last                     agui.Position
	)
	fresh := func(id string) error {
		if id == "" || ids[id] {
			return fmt.Errorf("id %q is empty or used before", id)
		}
		ids[id] = true
		return nil
	}
	for i, pe := range evs {
		e := pe.Event
		fail := func(format string, args ...any) error {
			return fmt.Errorf("event %d at %s (%s): %s", i, pe.Pos, e.Type, fmt.Sprintf(format, args...))
		}
		if i > 0 && !last.Less(pe.Pos) {
			return fail("position does not follow %s", last)
		}
		last = pe.Pos
		if _, err := json.Marshal(e); err != nil {
			return fail("does not marshal: %v", err)
		}
		if i == 0 && e.Type != agui.RunStarted {
			return fail("the first event must be RUN_STARTED")
		}
		switch {
		case errored && e.Type != agui.RunStarted:
			return fail("after RUN_ERROR")
		case finished && e.Type != agui.RunStarted && e.Type != agui.RunError:
			return fail("after RUN_FINISHED")
		}
		switch e.Type {
		case agui.RunStarted:
			if inRun && !finished && !errored {
				return fail("while a run is open")
			}
			if e.ThreadID == "" || e.RunID == "" {
				return fail("no threadId or runId")
			}
			if err := fresh("run " + e.RunID); err != nil {
				return fail("%v", err)
			}
			inRun, finished, errored = true, false, false
		case agui.RunFinished, agui.RunError:
			if len(texts)+len(spans)+len(reasoning)+len(tools) > 0 {
				return fail("with messages or tool calls open: %v %v %v %v", texts, spans, reasoning, tools)
			}
			// An interrupt's tool call waits for its result in a later run.
			waits := map[string]bool{}
			if e.Type == agui.RunFinished && e.Outcome != nil && e.Outcome.Type == agui.OutcomeInterrupt {
				if len(e.Outcome.Interrupts) == 0 {
					return fail("an interrupt outcome with no interrupts")
				}
				for _, in := range e.Outcome.Interrupts {
					if in.ID == "" || in.Reason == "" {
						return fail("an interrupt with no id or reason")
					}
					waits[in.ToolCallID] = true
				}
			}
			for id := range unanswered {
				if !waits[id] {
					return fail("with tool calls unanswered: %v", unanswered)
				}
			}
			if e.Type == agui.RunFinished {
				finished = true
				if e.Outcome == nil || e.ThreadID == "" || e.RunID == "" {
					return fail("no outcome, threadId or runId")
				}
			} else {
				errored = true
				if e.Message == "" {
					return fail("no message")
				}
			}
		case agui.TextMessageStart:
			if err := fresh(e.MessageID); err != nil {
				return fail("%v", err)
			}
			texts[e.MessageID] = true
		case agui.TextMessageContent, agui.TextMessageEnd:
			if !texts[e.MessageID] {
				return fail("message %q is not open", e.MessageID)
			}
			if e.Type == agui.TextMessageEnd {
				delete(texts, e.MessageID)
			} else if e.Delta == "" {
				return fail("empty delta")
			}
		case agui.ReasoningStart:
			if err := fresh(e.MessageID); err != nil {
				return fail("%v", err)
			}
			spans[e.MessageID] = true
		case agui.ReasoningMessageStart:
			if reasoning[e.MessageID] || e.Role != "reasoning" {
				return fail("reasoning message %q open already, or role %q", e.MessageID, e.Role)
			}
			reasoning[e.MessageID] = true
		case agui.ReasoningMessageContent, agui.ReasoningMessageEnd:
			if !reasoning[e.MessageID] {
				return fail("reasoning message %q is not open", e.MessageID)
			}
			if e.Type == agui.ReasoningMessageEnd {
				delete(reasoning, e.MessageID)
			}
		case agui.ReasoningEnd:
			if !spans[e.MessageID] {
				return fail("reasoning span %q is not open", e.MessageID)
			}
			delete(spans, e.MessageID)
		case agui.ToolCallStart:
			if err := fresh(e.ToolCallID); err != nil {
				return fail("%v", err)
			}
			if e.ToolCallName == "" {
				return fail("no toolCallName")
			}
			tools[e.ToolCallID], unanswered[e.ToolCallID] = true, true
		case agui.ToolCallArgs, agui.ToolCallEnd:
			if !tools[e.ToolCallID] {
				return fail("tool call %q is not open", e.ToolCallID)
			}
			if e.Type == agui.ToolCallEnd {
				delete(tools, e.ToolCallID)
			}
		case agui.ToolCallResult:
			if !unanswered[e.ToolCallID] || tools[e.ToolCallID] || e.Content == nil {
				return fail("tool call %q is not waiting for a result, or no content", e.ToolCallID)
			}
			if err := fresh(e.MessageID); err != nil {
				return fail("%v", err)
			}
			delete(unanswered, e.ToolCallID)
		case agui.Custom:
			if e.Name == "" || e.Value == nil {
				return fail("no name or value")
			}
		case agui.Raw:
			if e.RawPayload == nil {
				return fail("no event")
			}
		default:
			return fail("unknown type")
		}
	}
	if ended && len(evs) > 0 && !finished && !errored {
		return fmt.Errorf("the stream ends inside a run")
	}
	return nil
}
