package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
)

func TestInputRecordRoundTrip(t *testing.T) {
	r := InputRecord{Seq: 7, Nonce: testNonce, EOF: true, Data: []byte("hi \xff\n")}
	line := r.Line()
	got, ok := ParseInputRecord(bytes.TrimSuffix(line, []byte("\n")), testNonce)
	if !ok || got.Seq != 7 || !got.EOF || !bytes.Equal(got.Data, r.Data) {
		t.Fatalf("ParseInputRecord(%q) = %+v, %v", line, got, ok)
	}
}

func TestParseInputRecordRejects(t *testing.T) {
	for _, tc := range []struct{ name, line, nonce string }{
		{"other nonce", `{"__input":1,"__nonce":"0123456789abcdef0123456789abcdef","data":""}`, testNonce},
		{"empty nonce", `{"__input":1,"__nonce":"","data":""}`, ""},
		{"agent line", `{"type":"user"}`, testNonce},
		{"unknown field", `{"__input":1,"__nonce":"` + testNonce + `","data":"","x":1}`, testNonce},
		{"seq zero", `{"__input":0,"__nonce":"` + testNonce + `","data":""}`, testNonce},
		{"seq string", `{"__input":"1","__nonce":"` + testNonce + `","data":""}`, testNonce},
		{"bad base64", `{"__input":1,"__nonce":"` + testNonce + `","data":"!!"}`, testNonce},
		{"two objects", `{"__input":1,"__nonce":"` + testNonce + `","data":""}{}`, testNonce},
		{"truncated", `{"__input":1,"__nonce":"` + testNonce, testNonce},
	} {
		if r, ok := ParseInputRecord([]byte(tc.line), tc.nonce); ok {
			t.Errorf("%s: parsed %q as %+v", tc.name, tc.line, r)
		}
	}
}

func FuzzParseInputRecord(f *testing.F) {
	f.Add([]byte(`{"__input":1,"__nonce":"`+testNonce+`","data":"aGk="}`), uint64(1))
	f.Add([]byte(`{"__input":1}`), uint64(0))
	f.Fuzz(func(t *testing.T, line []byte, _ uint64) {
		r, ok := ParseInputRecord(line, testNonce)
		if !ok {
			return
		}
		// What parses re-encodes to a record that parses the same.
		again, ok := ParseInputRecord(bytes.TrimSuffix(r.Line(), []byte("\n")), testNonce)
		if !ok || again.Seq != r.Seq || again.EOF != r.EOF || !bytes.Equal(again.Data, r.Data) {
			t.Fatalf("%q parsed as %+v, re-encoded as %+v (%v)", line, r, again, ok)
		}
	})
}

// Insert never cuts an agent's line: it waits for the line to end.
func TestWriterInsertBetweenLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { _, err := w.Write([]byte("a\n")); return err },
		func() error { return w.Insert([]byte("I1\n")) }, // at a line's end: at once
		func() error { _, err := w.Write([]byte("b")); return err },
		func() error { return w.Insert([]byte("I2\n")) }, // held: "b" is a line in progress
		func() error { return w.Insert([]byte("I3\n")) },
		func() error { _, err := w.Write([]byte("c\nd")); return err },
		func() error { return w.Insert([]byte("I4\n")) }, // held until Finish ends "d"
		func() error { return w.Finish(Sentinel{Nonce: testNonce, Reason: ReasonExit}) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	b, _ := os.ReadFile(path)
	want := "a\nI1\nbc\nI2\nI3\nd\nI4\n" + string(Sentinel{Nonce: testNonce, Reason: ReasonExit}.Line())
	if string(b) != want {
		t.Fatalf("journal = %q, want %q", b, want)
	}
	if err := w.Insert([]byte("late\n")); err == nil {
		t.Fatal("Insert after Finish succeeded")
	}
}

// InsertAfter puts a record after the agent's output still waiting in its
// pipe: held, however long the copy is in coming, until the copy has
// appended that output; at once when none waits, or the copy has ended.
func TestWriterInsertAfterQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	queued := func() int64 { return int64(len("printed before\n")) }
	if _, err := pw.Write([]byte("printed before\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.InsertAfter([]byte("R\n"), queued); err != nil {
		t.Fatal(err)
	}
	// The copy starts late (the bound that was here, 1 s, let the record
	// in first).
	time.Sleep(1100 * time.Millisecond)
	if n := w.Size(); n != 0 {
		t.Fatalf("journal of %d bytes before the copy started", n)
	}
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(r); copied <- err }()
	testenv.WaitFor(t, 10*time.Second, "the copy to append the queued line and the record after it",
		func() bool { return w.Size() == int64(len("printed before\nR\n")) })
	// Nothing queued: at once.
	if err := w.InsertAfter([]byte("S\n"), func() int64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("printed after\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	// Output announced but never read: after the copy ended, at once.
	if err := w.InsertAfter([]byte("T\n"), func() int64 { return 100 }); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(Sentinel{Nonce: testNonce, Reason: ReasonExit}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := "printed before\nR\nS\nprinted after\nT\n" + string(Sentinel{Nonce: testNonce, Reason: ReasonExit}.Line())
	if string(b) != want {
		t.Fatalf("journal = %q, want %q", b, want)
	}
}

// A record held for output the copy never gets follows what the copy
// appended when it ends, before the sentinel.
func TestWriterInsertAfterCopyEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(r); copied <- err }()
	if _, err := pw.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the copy to append the partial line", func() bool { return w.Size() == int64(len("partial")) })
	if err := w.InsertAfter([]byte("R\n"), func() int64 { return 100 }); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	s := Sentinel{Nonce: testNonce, Reason: ReasonExit}
	if err := w.Finish(s); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "partial\nR\n"+string(s.Line()) {
		t.Fatalf("journal = %q", b)
	}
}
