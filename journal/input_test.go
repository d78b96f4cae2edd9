package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// pipe, and waits no longer than its bound for output that never comes.
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
	if _, err := pw.Write([]byte("printed before\n")); err != nil {
		t.Fatal(err)
	}
	inserted := make(chan error, 1)
	go func() {
		inserted <- w.InsertAfter([]byte("R\n"), func() int64 { return int64(len("printed before\n")) }, 10*time.Second)
	}()
	select {
	case err := <-inserted:
		t.Fatalf("InsertAfter returned (%v) before the queued output was read", err)
	case <-time.After(50 * time.Millisecond):
	}
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(r); copied <- err }()
	select {
	case err := <-inserted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for InsertAfter once the queued output was read")
	}
	if _, err := pw.Write([]byte("printed after\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	// Output announced but never read: after the copy ended, at once.
	start := time.Now()
	if err := w.InsertAfter([]byte("S\n"), func() int64 { return 100 }, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("InsertAfter after the copy ended waited %v", d)
	}
	if err := w.Finish(Sentinel{Nonce: testNonce, Reason: ReasonExit}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := "printed before\nR\nprinted after\nS\n" + string(Sentinel{Nonce: testNonce, Reason: ReasonExit}.Line())
	if string(b) != want {
		t.Fatalf("journal = %q, want %q", b, want)
	}
}

// InsertAfter waits no longer than its bound for output the copy never
// gets.
func TestWriterInsertAfterBound(t *testing.T) {
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
	start := time.Now()
	if err := w.InsertAfter([]byte("R\n"), func() int64 { return 100 }, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Fatalf("InsertAfter waited %v for output that never came, its bound 50ms", d)
	}
	pw.Close()
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "R\n" {
		t.Fatalf("journal = %q", b)
	}
}
