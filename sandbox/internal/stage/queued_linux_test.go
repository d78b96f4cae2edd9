package stage

import (
	"os"
	"testing"
)

func TestQueuedBytes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if n := queuedBytes(r); n != 0 {
		t.Fatalf("empty pipe: %d bytes queued", n)
	}
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if n := queuedBytes(r); n != 6 {
		t.Fatalf("%d bytes queued, want 6", n)
	}
}
