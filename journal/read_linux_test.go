package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadFromBlockingFile: ReadFrom reads a blocking pipe (no poller to
// wait on) with the writer's lock let go, so Insert goes on while the
// read waits for the agent.
func TestReadFromBlockingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	w := openWriter(t, path)
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, pw := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(r); copied <- err }()
	time.Sleep(50 * time.Millisecond) // into its read
	inserted := make(chan error, 1)
	go func() { inserted <- w.Insert([]byte("R\n")) }()
	select {
	case err := <-inserted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for Insert while ReadFrom read a blocking pipe")
	}
	if _, err := pw.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	select {
	case err := <-copied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for ReadFrom to end after the pipe's writer closed")
	}
	r.Close()
	w.Close()
	if b, _ := os.ReadFile(path); string(b) != "R\nline\n" {
		t.Fatalf("journal = %q", b)
	}
}
