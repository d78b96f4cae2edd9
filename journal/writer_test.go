package journal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openWriter(t testing.TB, path string) *Writer {
	t.Helper()
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestOpenWriterOnPartialLine: a writer opened on a journal that ends in
// a partial line knows it, and Finish ends that line before the sentinel
// (the journal was write-only, so the check read nothing and glued the
// sentinel to the line).
func TestOpenWriterOnPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	if err := os.WriteFile(path, []byte("done\nno newline"), 0o640); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, path)
	s := Sentinel{Nonce: NewNonce(), Reason: ReasonExit}
	if err := w.Finish(s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if want := "done\nno newline\n" + string(s.Line()); err != nil || string(b) != want {
		t.Fatalf("journal %q (%v), want %q", b, err, want)
	}
}

// TestWriterLimit: ReadFrom appends up to the limit exactly, wherever the
// reads fall, and says when the input went past it; input of exactly the
// limit is no offence.
func TestWriterLimit(t *testing.T) {
	input := strings.Repeat("0123456789\n", 100) // 1100 bytes
	for _, tc := range []struct {
		limit   int64
		wantErr bool
	}{{0, false}, {1100, false}, {1101, false}, {1099, true}, {500, true}, {1, true}} {
		path := filepath.Join(t.TempDir(), "journal.ndjson")
		w := openWriter(t, path)
		w.SetLimit(tc.limit)
		// Reads of 7 bytes, so the limit falls inside one.
		n, err := w.ReadFrom(sevenBytes{strings.NewReader(input)})
		if gotErr := errors.Is(err, ErrOutputLimit); gotErr != tc.wantErr || (err != nil && !gotErr) {
			t.Fatalf("limit %d: ReadFrom error %v, want the output limit: %v", tc.limit, err, tc.wantErr)
		}
		want := input
		if tc.wantErr {
			want = input[:tc.limit]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		if string(b) != want || n != int64(len(want)) {
			t.Fatalf("limit %d: journal of %d bytes (ReadFrom said %d), want %d", tc.limit, len(b), n, len(want))
		}
	}
}

// sevenBytes reads at most 7 bytes at a time.
type sevenBytes struct{ r io.Reader }

func (s sevenBytes) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 7)]) }

// BenchmarkReadFrom: the agent's stdout into the journal, one write(2) of
// a 100-byte line at a time through a real pipe, as an agent prints.
func BenchmarkReadFrom(b *testing.B) {
	w := openWriter(b, filepath.Join(b.TempDir(), "journal.ndjson"))
	r, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(r); copied <- err }()
	line := []byte(strings.Repeat("x", 99) + "\n")
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for range b.N {
		if _, err := pw.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	pw.Close()
	if err := <-copied; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if n := w.Size(); n != int64(b.N*len(line)) {
		b.Fatalf("journal of %d bytes, want %d", n, b.N*len(line))
	}
	w.Close()
}
