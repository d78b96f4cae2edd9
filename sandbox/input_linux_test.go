package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// With stdin "stream" the runner writes each input message once, in order,
// as one line, after the job's input, records it in the journal before
// what the agent answers, and closes stdin on end of input.
func TestStreamInput(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`test -p /dev/stdin && echo pipe; while read -r l; do echo "echo:$l"; done; echo eof`)...)
	spec.Stdin = config.StdinStream
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
	out, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
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

// A run with stdin "once" has no input socket.
func TestOnceRunTakesNoInput(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`sleep 5`)...)
	dir := start(t, spec, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sandbox.DialInput(ctx, dir); !errors.Is(err, sandbox.ErrNoInput) {
		t.Fatalf("DialInput: %v, want ErrNoInput", err)
	}
}
