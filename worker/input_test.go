package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// echoAgent answers each stdin line with "echo:<line>" and says "eof" at
// end of input.
const echoAgent = `while read -r l; do echo "echo:$l"; done; echo eof`

func withChatProfile() harnessOption {
	return withConfig(func(c *config.Config) {
		c.Profiles["chat"] = config.Profile{Command: []string{"/bin/sh", "-c", echoAgent},
			Timeout: 2 * time.Minute, Stdin: config.StdinStream}
	})
}

// assertInputRecord checks that the journal holds, from start to end, the
// runner's record of the input message m carries.
func (h *harness) assertInputRecord(runID string, body []byte, start, end int64, m jetstream.Msg) {
	h.t.Helper()
	if end > int64(len(body)) || end <= start {
		h.t.Fatalf("input message at offset %d..%d, journal of %d bytes", start, end, len(body))
	}
	nonce, err := sandbox.ReadNonce(journal.Dir(filepath.Join(h.stateDir, "runs", runID)))
	if err != nil {
		h.t.Fatal(err)
	}
	rec, ok := journal.ParseInputRecord(body[start:end-1], nonce)
	if !ok {
		h.t.Fatalf("input message at %d..%d: the journal has %q there", start, end, body[start:end])
	}
	if !bytes.Equal(rec.Data, m.Data()) || m.Headers().Get(protocol.HeaderInputSeq) != strconv.FormatUint(rec.Seq, 10) {
		h.t.Fatalf("input message %q (seq %s) for the journal's record %+v", m.Data(), m.Headers().Get(protocol.HeaderInputSeq), rec)
	}
}

// Input sent while the run is handed off from worker to worker reaches the
// agent exactly once, in order, and the chain shows each input right where
// the runner wrote it, before the agent's answer.
func TestInputExactlyOnceAcrossHandoff(t *testing.T) {
	h := newHarness(t, withChatProfile())
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "chat", "input": "first\n"})
	holder := h.waitStatus(id, protocol.StatusStarted).Worker
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(300 * time.Millisecond)
		h.stopWorker(holder) // mid-conversation: the other worker takes over
	})
	for i := 1; i <= n; i++ {
		var opts []client.SendOption
		if i == n {
			opts = append(opts, client.WithEOF())
		}
		if _, err := c.Send(ctx, id, []byte(fmt.Sprintf("m%d", i)), opts...); err != nil {
			t.Fatalf("send m%d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	msgs := h.chain(id, time.Minute)
	h.assertChainMatchesJournal(id, msgs)
	var got []string
	for _, m := range msgs {
		switch {
		case strings.HasSuffix(m.Subject(), ".input"):
			got = append(got, "in:"+strings.TrimSuffix(string(m.Data()), "\n"))
		case strings.HasSuffix(m.Subject(), ".raw"):
			got = append(got, string(m.Data()))
		}
	}
	// Inputs in order, answers in order, each answer after its input
	// (the agent may read several inputs before it answers the first).
	var ins, echoes []string
	pos := map[string]int{}
	for i, g := range got {
		pos[g] = i
		if strings.HasPrefix(g, "in:") {
			ins = append(ins, strings.TrimPrefix(g, "in:"))
		} else {
			echoes = append(echoes, g)
		}
	}
	var wantIns, wantEchoes []string
	wantEchoes = append(wantEchoes, "echo:first")
	for i := 1; i <= n; i++ {
		wantIns = append(wantIns, fmt.Sprintf("m%d", i))
		wantEchoes = append(wantEchoes, fmt.Sprintf("echo:m%d", i))
	}
	wantEchoes = append(wantEchoes, "eof")
	if strings.Join(ins, " ") != strings.Join(wantIns, " ") || strings.Join(echoes, " ") != strings.Join(wantEchoes, " ") {
		t.Fatalf("chain:\n%s\nwant inputs %v and lines %v", strings.Join(got, " "), wantIns, wantEchoes)
	}
	for _, in := range wantIns {
		if pos["in:"+in] > pos["echo:"+in] {
			t.Fatalf("the agent's answer to %s comes before the input on the chain: %v", in, got)
		}
	}
	st := statuses(t, msgs)
	if last := st[len(st)-1]; last.Status != protocol.StatusSucceeded {
		t.Fatalf("run ended %+v", last)
	}
	var kinds []string
	for _, s := range st {
		kinds = append(kinds, string(s.Status))
	}
	if !strings.Contains(strings.Join(kinds, ","), "handoff,attached") {
		t.Fatalf("statuses %v: no hand-off happened", kinds)
	}
}

// Input that cannot be taken is refused with a clear error, never dropped.
func TestInputRefusals(t *testing.T) {
	h := newHarness(t, withChatProfile(), withConfig(func(c *config.Config) { c.MaxInputBytes = 1024 }))
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Send(ctx, "nosuchrun", []byte("x")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown run: %v, want ErrNotFound", err)
	}
	once := newRunID(t)
	h.submit(map[string]any{"runId": once, "profile": "fake", "args": []string{"--lines", "400", "--rate", "100"}})
	h.waitStatus(once, protocol.StatusStarted)
	if _, err := c.Send(ctx, once, []byte("x")); !errors.Is(err, client.ErrNoInput) {
		t.Fatalf("stdin once run: %v, want ErrNoInput", err)
	}
	chat := newRunID(t)
	h.submit(map[string]any{"runId": chat, "profile": "chat"})
	h.waitStatus(chat, protocol.StatusStarted)
	if _, err := c.Send(ctx, chat, bytes.Repeat([]byte("a"), 1025)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("input over maxInputBytes: %v, want ErrTooLarge", err)
	}
	rep, err := c.Send(ctx, chat, nil, client.WithEOF())
	if err != nil || rep.Seq == 0 {
		t.Fatalf("end of input: %+v, %v", rep, err)
	}
	if _, err := c.Send(ctx, chat, []byte("late")); !errors.Is(err, client.ErrTerminal) {
		t.Fatalf("input after end of input: %v, want ErrTerminal", err)
	}
	if st := h.terminal(chat); st.Status != protocol.StatusSucceeded {
		t.Fatalf("chat run ended %+v", st)
	}
	if _, err := c.Send(ctx, chat, []byte("x")); !errors.Is(err, client.ErrTerminal) {
		t.Fatalf("finished run: %v, want ErrTerminal", err)
	}
}

// A multi-turn conversation with the scripted agent: a turn, a permission
// prompt answered by an input line, a slow turn stopped by interrupts
// (SIGINT, then the profile's interrupt line) that leave the run going,
// and a last turn; then end of input ends the run.
func TestConversationWithApprovalAndInterrupts(t *testing.T) {
	const interruptLine = `{"type":"control_request","request_id":"baton-int","request":{"subtype":"interrupt"}}`
	h := newHarness(t, withConfig(func(c *config.Config) {
		agent := []string{"{baton}", "fake-agent", "--chat"}
		c.Profiles["claude-sig"] = config.Profile{Command: agent, Timeout: 2 * time.Minute, Stdin: config.StdinStream}
		c.Profiles["claude-line"] = config.Profile{Command: agent, Timeout: 2 * time.Minute, Stdin: config.StdinStream,
			Interrupt: config.Interrupt{Line: interruptLine}}
	}))
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, profile := range []string{"claude-sig", "claude-line"} {
		t.Run(profile, func(t *testing.T) {
			id := newRunID(t)
			h.submit(map[string]any{"runId": id, "profile": profile, "input": string(client.StreamJSONUserMessage("hello")) + "\n"})
			h.waitStatus(id, protocol.StatusStarted)
			events := h.follow(ctx, id)
			waitEvent := func(what string) map[string]any {
				t.Helper()
				for {
					select {
					case ev := <-events:
						if what == "" || strings.Contains(fmt.Sprint(ev), what) {
							return ev
						}
					case <-ctx.Done():
						t.Fatalf("no event with %q", what)
					}
				}
			}
			send := func(data []byte, opts ...client.SendOption) {
				t.Helper()
				if _, err := c.Send(ctx, id, data, opts...); err != nil {
					t.Fatal(err)
				}
			}
			waitEvent("result:echo: hello")
			send(client.StreamJSONUserMessage("approve: make test"))
			req := waitEvent("can_use_tool")
			answer := fmt.Sprintf(`{"type":"control_response","response":{"subtype":"success","request_id":%q,"response":{"behavior":"allow","updatedInput":{"command":"make test"}}}}`, req["request_id"])
			send([]byte(answer))
			waitEvent("result:ran: make test")
			send(client.StreamJSONUserMessage("slow"))
			waitEvent("progress")
			if _, err := c.Interrupt(ctx, id); err != nil {
				t.Fatal(err)
			}
			if ev := waitEvent("terminal_reason:aborted_streaming"); ev["type"] != "result" {
				t.Fatalf("interrupted turn ended with %v", ev)
			}
			send(client.StreamJSONUserMessage("still there?"))
			waitEvent("result:echo: still there?")
			send(nil, client.WithEOF())
			if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
				t.Fatalf("run ended %+v, want succeeded: an interrupt is not a cancel", st)
			}
		})
	}
}

// follow delivers the decoded events of runID's chain as they come.
func (h *harness) follow(ctx context.Context, runID string) <-chan map[string]any {
	h.t.Helper()
	cons, err := h.js.OrderedConsumer(ctx, h.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.names.EventsSubject(runID)}})
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(chan map[string]any, 64)
	go func() {
		for ctx.Err() == nil {
			m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
			if err != nil {
				continue
			}
			var ev map[string]any
			if json.Unmarshal(m.Data(), &ev) == nil {
				select {
				case out <- ev:
				case <-ctx.Done():
				}
			}
		}
	}()
	return out
}

// withTurns adds a profile "turns": the fake agent's chat, each result
// line a turn's end, a run waiting past idle ending.
func withTurns(idle time.Duration) harnessOption {
	return withConfig(func(c *config.Config) {
		c.Profiles["turns"] = config.Profile{Command: []string{"{baton}", "fake-agent", "--chat"}, Timeout: 2 * time.Minute,
			Stdin: config.StdinStream, TurnEnd: &config.TurnEnd{Field: "type", Equals: "result"}, IdleTimeout: idle}
	})
}

// sendAfterFirstTurn submits a run of profile turns with input "hello",
// sends it data with opts once it first waits, and returns its id.
func sendAfterFirstTurn(t *testing.T, h *harness, data []byte, opts ...client.SendOption) string {
	t.Helper()
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "turns", "input": "hello\n"})
	h.waitStatus(id, protocol.StatusWaiting)
	if _, err := c.Send(ctx, id, data, opts...); err != nil {
		t.Fatal(err)
	}
	return id
}

// With turnEnd, the run is "waiting" after each turn and "running" once
// input is written; past idleTimeout waiting it ends as a timeout, reason
// idle.
func TestTurnStatusesAndIdleTimeout(t *testing.T) {
	h := newHarness(t, withTurns(2*time.Second))
	id := sendAfterFirstTurn(t, h, []byte("again"))
	msgs := h.chain(id, time.Minute)
	h.assertChainMatchesJournal(id, msgs)
	if got := turnKinds(msgs); got != "started,result,waiting,input,running,result,waiting,timeout" {
		t.Fatalf("chain: %s", got)
	}
	if st, _ := protocol.ParseStatus(msgs[len(msgs)-1].Data()); st.Reason != sandbox.IdleReason {
		t.Fatalf("terminal status %+v, want reason %q", st, sandbox.IdleReason)
	}
}

// turnKinds sums up a chain's turns: its statuses, inputs and result lines.
func turnKinds(msgs []jetstream.Msg) string {
	var kinds []string
	for _, m := range msgs {
		switch {
		case strings.HasSuffix(m.Subject(), ".status"):
			st, _ := protocol.ParseStatus(m.Data())
			kinds = append(kinds, string(st.Status))
		case strings.HasSuffix(m.Subject(), ".input"):
			kinds = append(kinds, "input")
		case strings.Contains(string(m.Data()), `"type":"result"`):
			kinds = append(kinds, "result")
		}
	}
	return strings.Join(kinds, ",")
}

// TestNoWaitAfterEndOfInput: a turn that ends after the run's end of input
// is not followed by "waiting", where the run showed waiting for input it
// could no longer take, just before it ended; one sent while the agent
// waits ends the wait.
func TestNoWaitAfterEndOfInput(t *testing.T) {
	h := newHarness(t, withTurns(time.Minute))
	id := sendAfterFirstTurn(t, h, []byte("last"), client.WithEOF())
	if got := turnKinds(h.chain(id, time.Minute)); got != "started,result,waiting,input,running,result,succeeded" {
		t.Fatalf("chain: %s", got)
	}
}

// TestIdleClockSurvivesHandoff: a run waiting for input that is handed off
// keeps its idle clock: the successor restates "waiting" after "attached"
// and ends the run idleTimeout after the agent began to wait, not after the
// hand-off (and not never, as when a successor counted from the next turn
// end only).
func TestIdleClockSurvivesHandoff(t *testing.T) {
	const idle = 3 * time.Second
	h := newHarness(t, withTurns(idle))
	_, stopSecond := h.addWorker("w2")
	defer stopSecond()
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "turns", "input": "hello\n"})
	holder := h.waitStatus(id, protocol.StatusStarted).Worker
	h.waitStatus(id, protocol.StatusWaiting)
	waitingAt := time.Now()
	time.Sleep(idle / 2)
	h.stopWorker(holder)
	msgs := h.chain(id, time.Minute)
	h.assertChainMatchesJournal(id, msgs)
	var kinds []string
	var end time.Time
	for _, m := range msgs {
		if !strings.HasSuffix(m.Subject(), ".status") {
			continue
		}
		st, _ := protocol.ParseStatus(m.Data())
		kinds = append(kinds, string(st.Status))
		if st.Status.Terminal() {
			if st.Reason != sandbox.IdleReason {
				t.Fatalf("terminal status %+v, want reason %q", st, sandbox.IdleReason)
			}
			md, _ := m.Metadata()
			end = md.Timestamp
		}
	}
	if got := strings.Join(kinds, ","); got != "started,waiting,handoff,attached,waiting,timeout" {
		t.Fatalf("statuses: %s", got)
	}
	// The clock ran on from the first "waiting"; a restarted clock would
	// end the run idle/2 later.
	if took := end.Sub(waitingAt); took > idle+idle/3 {
		t.Fatalf("run ended %s after it began to wait, want about %s: the successor restarted the idle clock", took, idle)
	}
}

// TestStreamJobInputIsTheFirstTurn: on a stream stdin the job's input is a
// line the agent answers before any send, and the first send is a line of
// its own, not glued onto it.
func TestStreamJobInputIsTheFirstTurn(t *testing.T) {
	h := newHarness(t, withChatProfile())
	c, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "chat", "input": "first"})
	h.waitLines(id, 1) // the agent answered the job's input with no send yet
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Send(ctx, id, []byte("second"), client.WithEOF()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range h.chain(id, time.Minute) {
		if strings.HasSuffix(m.Subject(), ".raw") {
			got = append(got, strings.TrimSuffix(string(m.Data()), "\n"))
		}
	}
	if want := []string{"echo:first", "echo:second", "eof"}; !slices.Equal(got, want) {
		t.Fatalf("agent printed %q, want %q", got, want)
	}
	if in := h.record(id).Input; in != "first" {
		t.Fatalf("the record shows the job's input as %q", in)
	}
}
