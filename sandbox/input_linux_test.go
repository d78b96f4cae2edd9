package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// echoLoop answers each stdin line with "echo:<line>", then says "eof".
const echoLoop = `while read -r l; do echo "echo:$l"; done; echo eof`

// With stdin "stream" the runner writes each input message once, in order,
// as one line, after the job's input, records it in the journal before
// what the agent answers, and closes stdin on end of input.
func TestStreamInput(t *testing.T) {
	t.Parallel()
	// The agent outlives its stdin by 3 s, so a message after end of input
	// meets the runner's refusal, not a run already over (a closed socket),
	// on a loaded machine too.
	spec := newSpec(t, sh(`test -p /dev/stdin && echo pipe; `+echoLoop+`; sleep 3`)...)
	spec.Stdin = runspec.StdinStream
	dir := start(t, spec, "first\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sandbox.DialInput(ctx, dir)
	if err != nil {
		t.Fatalf("DialInput: %v", err)
	}
	defer c.Close()
	if st := c.State(); st.Last != 0 || st.Closed {
		t.Fatalf("new run's input state = %+v", st)
	}
	waitJournal(t, dir, "echo:first\n")
	send := func(m sandbox.InputMessage) (sandbox.InputState, error) {
		t.Helper()
		return c.Write(ctx, m)
	}
	if _, err := send(sandbox.InputMessage{Seq: 5, Prev: 0, Data: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	waitJournal(t, dir, "echo:two\n")
	// Sent again (a successor worker): written once.
	if st, err := send(sandbox.InputMessage{Seq: 5, Prev: 0, Data: []byte("two")}); err != nil || st.Last != 5 {
		t.Fatalf("duplicate: %+v, %v", st, err)
	}
	// A message whose predecessor was not written is refused: none skipped.
	if _, err := send(sandbox.InputMessage{Seq: 9, Prev: 7, Data: []byte("gap")}); !errors.Is(err, sandbox.ErrInputRefused) {
		t.Fatalf("gap: %v, want ErrInputRefused", err)
	}
	// A second connection (a successor) sees where stdin stands.
	c2, err := sandbox.DialInput(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if st := c2.State(); st.Last != 5 {
		t.Fatalf("second connection's state = %+v, want last 5", st)
	}
	if _, err := c2.Write(ctx, sandbox.InputMessage{Seq: 7, Prev: 5, Data: []byte("three\n"), EOF: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := send(sandbox.InputMessage{Seq: 8, Prev: 7, Data: []byte("late")}); !errors.Is(err, sandbox.ErrInputRefused) {
		t.Fatalf("after end of input: %v, want ErrInputRefused", err)
	}
	out, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if r, ok := journal.ParseInputRecord([]byte(l), spec.Nonce); ok {
			l = "input " + string(r.Data[:len(r.Data)-1])
			if r.EOF {
				l += " eof"
			}
		}
		got = append(got, l)
	}
	want := []string{"pipe", "echo:first", "input two", "echo:two", "input three eof", "echo:three", "eof"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	if _, err := sandbox.DialInput(ctx, dir); !errors.Is(err, sandbox.ErrNoInput) {
		t.Fatalf("DialInput after the run: %v, want ErrNoInput", err)
	}
}

// A run with stdin "once" takes no input message (its stdin is closed once
// the job's input is written), but is interrupted by SIGINT, and goes on.
func TestInterruptBySignal(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`trap 'echo got-int' INT; echo ready; n=0; while [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); [ -e /tmp/go ] && break; done; echo after`)...)
	dir := start(t, spec, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sandbox.DialInput(ctx, dir)
	if err != nil {
		t.Fatalf("DialInput: %v", err)
	}
	defer c.Close()
	waitJournal(t, dir, "ready\n")
	for c.State().Closed == false {
		// The job's (empty) input is written and stdin closed at once.
		if c, err = sandbox.DialInput(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	// Passed over, not written: stdin is closed.
	if st, err := c.Write(ctx, sandbox.InputMessage{Seq: 2, Prev: 0, Data: []byte("x")}); !errors.Is(err, sandbox.ErrInputRefused) || st.Last != 2 {
		t.Fatalf("input to a stdin once run: %+v, %v, want ErrInputRefused", st, err)
	}
	if _, err := c.Write(ctx, sandbox.InputMessage{Seq: 3, Prev: 2, Interrupt: true}); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	out, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || lines[0] != "ready" || lines[2] != "got-int" || lines[3] != "after" {
		t.Fatalf("journal %q; state:\n%s", lines, readFile(t, dir.State()))
	}
	if r, ok := journal.ParseInputRecord([]byte(lines[1]), spec.Nonce); !ok || !r.Interrupt || r.Seq != 3 || len(r.Data) != 0 {
		t.Fatalf("interrupt record %q", lines[1])
	}
}

// A profile's interrupt line is written to stdin, in order with the input.
func TestInterruptByLine(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(echoLoop)...)
	spec.Stdin, spec.InterruptLine = runspec.StdinStream, `{"type":"control_request","request":{"subtype":"interrupt"}}`
	dir := start(t, spec, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sandbox.DialInput(ctx, dir)
	if err != nil {
		t.Fatalf("DialInput: %v", err)
	}
	defer c.Close()
	for _, m := range []sandbox.InputMessage{{Seq: 1, Data: []byte("a")}, {Seq: 2, Prev: 1, Interrupt: true}, {Seq: 4, Prev: 2, EOF: true}} {
		if _, err := c.Write(ctx, m); err != nil {
			t.Fatalf("input %d: %v", m.Seq, err)
		}
	}
	out, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	var echoes []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if r, ok := journal.ParseInputRecord([]byte(l), spec.Nonce); ok {
			if r.Interrupt != (r.Seq == 2) {
				t.Fatalf("record %+v", r)
			}
			continue
		}
		echoes = append(echoes, l)
	}
	if want := "echo:a|echo:" + spec.InterruptLine + "|eof"; strings.Join(echoes, "|") != want {
		t.Fatalf("agent read %q, want %q", echoes, want)
	}
}
