package stage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
)

// TestInsertAfterOrder: a record of something the agent did after
// printing a line goes after that line in the journal, however the copy
// of its stdout is scheduled. A real process prints a line, then tells
// the test (as a connection tells the proxy), and waits for the test to
// have called InsertAfter.
// The copy's goroutine is parked for a while whenever a read of the pipe
// has returned, as CPU load parks it (the stage runs on one P): a record
// once slipped in there, the line out of the pipe and not yet counted
// (without the park, this test under load did not hit that window in
// 36,000 rounds; TestEgressOnTheChain, in a session before this test,
// about 1 run in 6 to 10).
func TestInsertAfterOrder(t *testing.T) {
	const rounds = 200
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	w, err := journal.OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	doneR, doneW, err := os.Pipe() // "I connected", one byte a round
	if err != nil {
		t.Fatal(err)
	}
	ackR, ackW, err := os.Pipe() // InsertAfter returned, one line a round
	if err != nil {
		t.Fatal(err)
	}
	script := `i=0; while [ $i -lt ` + strconv.Itoa(rounds) + ` ]; do
		echo "line $i"; printf x >&3; read ack <&4 || exit 1; i=$((i+1)); done`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdout, cmd.ExtraFiles = stdoutW, []*os.File{doneW, ackR}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdoutW.Close()
	doneW.Close()
	ackR.Close()
	defer stdoutR.Close()
	defer doneR.Close()
	defer ackW.Close() // the process ends, if the test does first
	copied := make(chan error, 1)
	go func() { _, err := w.ReadFrom(parkedAfterRead{stdoutR}); copied <- err }()
	b := make([]byte, 1)
	for i := range rounds {
		_ = doneR.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := doneR.Read(b); err != nil {
			t.Fatalf("round %d: waited 10s for the process to connect: %v", i, err)
		}
		if err := w.InsertAfter([]byte("record "+strconv.Itoa(i)+"\n"), func() int64 { return queuedBytes(stdoutR) }); err != nil {
			t.Fatal(err)
		}
		if _, err := ackW.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
	}
	ackW.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-copied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for the copy to end after the process did")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if len(lines) != 2*rounds {
		t.Fatalf("%d journal lines, want %d", len(lines), 2*rounds)
	}
	for i := range rounds {
		l, r := fmt.Sprintf("line %d", i), fmt.Sprintf("record %d", i)
		if string(lines[2*i]) != l || string(lines[2*i+1]) != r {
			t.Fatalf("journal lines %d-%d are %q, %q; want %q, %q", 2*i, 2*i+1, lines[2*i], lines[2*i+1], l, r)
		}
	}
}

// parkedAfterRead is the agent's stdout pipe, its reads parked 5 ms once
// read(2) has returned.
type parkedAfterRead struct{ *os.File }

func (p parkedAfterRead) Read(b []byte) (int, error) {
	n, err := p.File.Read(b)
	time.Sleep(5 * time.Millisecond)
	return n, err
}
