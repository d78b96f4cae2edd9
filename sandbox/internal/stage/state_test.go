package stage

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStateRecords(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.ndjson")
	st := openState(p, "outer")
	if st == nil {
		t.Fatal("openState returned nil")
	}
	st.ok("lock", "")
	st.fail("journal", errors.New("disk full"))
	// A second stage appends to the same file.
	inner := openState(p, "inner")
	inner.ok("clone-child", "pid 7")
	st.close()
	inner.close()

	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", info.Mode().Perm())
	}
	wantRecords(t, p,
		stateRecord{Stage: "outer", Phase: "lock", Status: "ok"},
		stateRecord{Stage: "outer", Phase: "journal", Status: "error", Detail: "disk full"},
		stateRecord{Stage: "inner", Phase: "clone-child", Status: "ok", Detail: "pid 7"})
}

// wantRecords checks that the state file at p holds want, in order, each
// with a time.
func wantRecords(t *testing.T, p string, want ...stateRecord) {
	t.Helper()
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("state file has %d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, line := range lines {
		var r stateRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
			t.Errorf("line %q: time: %v", line, err)
		}
		r.Time = ""
		if r != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, r, want[i])
		}
	}
}

func TestNilStateIsSilent(t *testing.T) {
	st := openState(filepath.Join(t.TempDir(), "missing-dir", "state.ndjson"), "outer")
	if st != nil {
		t.Fatal("openState of an unreachable path returned a state")
	}
	st.ok("phase", "detail")
	st.fail("phase", errors.New("x"))
	st.close()
	if stateOn(nil, "inner") != nil {
		t.Error("stateOn(nil) is not nil")
	}
}

// TestEgressNotes: refusals get a status of their own, and past the limit
// one note says the rest go unrecorded.
func TestEgressNotes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.ndjson")
	st := openState(p, "outer")
	logf := egressNotes(st, 3)
	for _, name := range []string{"a.example", "b.example", "c.example", "d.example"} {
		logf("dns: refused %q", name)
	}
	st.close()
	wantRecords(t, p,
		stateRecord{Stage: "outer", Phase: "egress", Status: "refused", Detail: `dns: refused "a.example"`},
		stateRecord{Stage: "outer", Phase: "egress", Status: "refused", Detail: `dns: refused "b.example"`},
		stateRecord{Stage: "outer", Phase: "egress", Status: "ok", Detail: "further refusals are not recorded"})
}
