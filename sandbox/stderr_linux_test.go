package sandbox_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
)

// TestStderrCap is F10's stderr: an agent that prints 8 MiB on stderr
// (within every other limit) leaves no more than limits.stderr of it on
// the node's disk, its tail behind a note, where stderr.log once grew to
// RLIMIT_FSIZE (limits.disk). The run is unaffected: it ends as its agent
// did, and the tail a status publishes is the agent's last words.
func TestStderrCap(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	spec := newSpec(t, sh(`head -c 8388608 /dev/zero | tr '\0' x >&2; echo >&2; echo the end >&2; echo out`)...)
	spec.Limits.Stderr = limit
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 30*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "out\n" {
		t.Errorf("journal = %q", stdout)
	}
	fi, err := os.Stat(dir.Stderr())
	if err != nil {
		t.Fatal(err)
	}
	got := readFile(t, dir.Stderr())
	if fi.Size() > limit+200 {
		t.Fatalf("stderr.log is %d bytes, over limits.stderr %d (and its note)", fi.Size(), limit)
	}
	if !strings.HasPrefix(got, "baton runner: stderr truncated: ") || !strings.HasSuffix(got, "xxxx\nthe end\n") {
		t.Fatalf("stderr.log: %d bytes, %.100q ... %q; want the note, then the agent's last bytes", len(got), got, got[max(0, len(got)-20):])
	}
	if tail := journal.StderrTail(dir, 2048); !strings.HasSuffix(tail, "xx\nthe end\n") {
		t.Fatalf("published tail ends %q", tail[max(0, len(tail)-20):])
	}
}

// TestStderrUnderCapWhole: stderr within limits.stderr is kept whole, with
// no note.
func TestStderrUnderCapWhole(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' y >&2`, 60<<10))...)
	spec.Limits.Stderr = 64 << 10
	dir := start(t, spec, "")
	_, s := waitEnd(t, dir, spec.Nonce, 30*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if got := readFile(t, dir.Stderr()); got != strings.Repeat("y", 60<<10) {
		t.Fatalf("stderr.log: %d bytes, want the agent's 61440 whole", len(got))
	}
}
