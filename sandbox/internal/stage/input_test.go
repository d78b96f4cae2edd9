package stage

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// pipeBuf is a stdin stand-in that can fail like a pipe whose reader left.
type pipeBuf struct {
	bytes.Buffer
	broken bool
	closed bool
}

func (p *pipeBuf) Write(b []byte) (int, error) {
	if p.broken {
		return 0, errors.New("broken pipe")
	}
	return p.Buffer.Write(b)
}

func (p *pipeBuf) Close() error { p.closed = true; return nil }

func newTestStdin(w io.WriteCloser, line string, signal func() error) *agentStdin {
	s := &agentStdin{w: w, signal: signal}
	if line != "" {
		s.interruptLine = []byte(line)
	}
	return s
}

func TestDeliver(t *testing.T) {
	var records []journal.InputRecord
	record := func(r journal.InputRecord) error { records = append(records, r); return nil }
	signals := 0
	w := &pipeBuf{}
	s := newTestStdin(w, "", func() error { signals++; return nil })
	steps := []struct {
		m       chain.InputMessage
		last    uint64
		refused bool
	}{
		{chain.InputMessage{Seq: 0, Data: []byte("zero")}, 0, true},         // no such sequence
		{chain.InputMessage{Seq: 4, Prev: 2, Data: []byte("gap")}, 0, true}, // its predecessor is not written
		{chain.InputMessage{Seq: 2, Data: []byte("a")}, 2, false},
		{chain.InputMessage{Seq: 2, Data: []byte("a")}, 2, false}, // again: not written twice
		{chain.InputMessage{Seq: 3, Prev: 2, Data: []byte("b\n")}, 3, false},
		{chain.InputMessage{Seq: 5, Prev: 3, Interrupt: true}, 5, false},
		{chain.InputMessage{Seq: 6, Prev: 5, EOF: true}, 6, false},
		{chain.InputMessage{Seq: 7, Prev: 6, Data: []byte("late")}, 7, true}, // stdin closed: passed over
		{chain.InputMessage{Seq: 8, Prev: 7, Interrupt: true}, 8, false},     // SIGINT needs no stdin
	}
	for i, st := range steps {
		got := s.deliver(st.m, record, "n")
		if got.Last != st.last || (got.Error != "") != st.refused {
			t.Fatalf("step %d (%+v): %+v, want last %d, refused %v", i, st.m, got, st.last, st.refused)
		}
	}
	if w.String() != "a\nb\n" || !w.closed || signals != 2 {
		t.Fatalf("stdin %q closed %v, %d signals", w.String(), w.closed, signals)
	}
	var seqs []uint64
	for _, r := range records {
		seqs = append(seqs, r.Seq)
	}
	if want := []uint64{2, 3, 5, 6, 8}; !equalSeqs(seqs, want) {
		t.Fatalf("journal records %v, want %v", seqs, want)
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The interrupt line goes to stdin like input; a broken stdin closes it.
func TestDeliverInterruptLineAndBrokenPipe(t *testing.T) {
	record := func(journal.InputRecord) error { return nil }
	w := &pipeBuf{}
	s := newTestStdin(w, `{"type":"control_request"}`, nil)
	if got := s.deliver(chain.InputMessage{Seq: 1, Interrupt: true}, record, "n"); got.Error != "" {
		t.Fatal(got.Error)
	}
	if w.String() != "{\"type\":\"control_request\"}\n" {
		t.Fatalf("stdin %q", w.String())
	}
	w.broken = true
	if got := s.deliver(chain.InputMessage{Seq: 2, Prev: 1, Data: []byte("x")}, record, "n"); !got.Closed || got.Last != 2 {
		t.Fatalf("write to a broken pipe: %+v", got)
	}
}

func TestInputLine(t *testing.T) {
	for _, tc := range []struct {
		m    chain.InputMessage
		want string
	}{
		{chain.InputMessage{Data: []byte("a")}, "a\n"},
		{chain.InputMessage{Data: []byte("a\n")}, "a\n"},
		{chain.InputMessage{}, "\n"},
		{chain.InputMessage{EOF: true}, ""},
		{chain.InputMessage{EOF: true, Data: []byte("z")}, "z\n"},
	} {
		if got := string(inputLine(tc.m)); got != tc.want {
			t.Errorf("inputLine(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
