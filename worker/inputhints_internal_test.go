package worker

import (
	"testing"

	"github.com/batonhq/baton/sandbox"
)

// A feeder takes from its hints only the message right after the last the
// runner wrote; older ones are dropped, later ones kept for their turn,
// and one the hints never had is read from the stream (not found here).
func TestInputHints(t *testing.T) {
	var h inputHints
	for _, m := range []sandbox.InputMessage{{Seq: 3, Prev: 2}, {Seq: 5, Prev: 3}, {Seq: 9, Prev: 5}} {
		h.add(m)
	}
	if m, ok := h.next(2); !ok || m.Seq != 3 {
		t.Fatalf("next(2) = %+v, %v; want 3", m, ok)
	}
	if m, ok := h.next(3); !ok || m.Seq != 5 {
		t.Fatalf("next(3) = %+v, %v; want 5", m, ok)
	}
	// The runner says 7 (a message another worker stored): 9 follows 5,
	// not 7, so it waits and 7's successor is read from the stream.
	if m, ok := h.next(7); ok {
		t.Fatalf("next(7) = %+v: 9 follows 5, not 7", m)
	}
	if m, ok := h.next(5); !ok || m.Seq != 9 {
		t.Fatalf("next(5) = %+v, %v; want 9", m, ok)
	}
	if _, ok := h.next(9); ok || len(h.msgs) != 0 {
		t.Fatalf("hints left after the last: %+v", h.msgs)
	}
	// Bounded: past maxHints a message is not kept (it is read back).
	for i := range maxHints + 10 {
		h.add(sandbox.InputMessage{Seq: uint64(i + 1), Prev: uint64(i)})
	}
	if len(h.msgs) != maxHints {
		t.Fatalf("%d hints kept, want at most %d", len(h.msgs), maxHints)
	}
	if _, ok := h.next(maxHints + 3); ok {
		t.Fatal("a message past the bound came from the hints")
	}
	if len(h.msgs) != 0 {
		t.Fatalf("hints at or before the runner's last kept: %d", len(h.msgs))
	}
}
