package stage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/egress"
)

// TestEgressRecords: each outcome becomes a nonced record in the journal,
// between the agent's lines; past the limit one note says the rest go
// unrecorded, and nothing more is written.
func TestEgressRecords(t *testing.T) {
	const nonce = "85be979a9cde500b9aa7e513cd00a79f"
	dir := t.TempDir()
	w, err := journal.OpenWriter(filepath.Join(dir, "journal.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	st := openState(filepath.Join(dir, "state.ndjson"), "outer")
	defer st.close()
	record := egressRecords(w.Insert, nonce, 2, st)
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.FixedZone("x", 3600))
	if _, err := w.Write([]byte("agent line in progress")); err != nil {
		t.Fatal(err)
	}
	record(egress.Outcome{Start: start, Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, BytesOut: 10, BytesIn: 20, Duration: 1500 * time.Millisecond})
	if _, err := w.Write([]byte(", ended\n")); err != nil {
		t.Fatal(err)
	}
	record(egress.Outcome{Start: start, Host: "evil.example", Port: 80, Method: "GET", Reason: "not on the allowlist"})
	for range 5 {
		record(egress.Outcome{Start: start, Host: "loop.example", Port: 443, Method: "CONNECT"})
	}
	if err := w.Finish(journal.Sentinel{Nonce: nonce, Reason: journal.ReasonExit}); err != nil {
		t.Fatal(err)
	}
	record(egress.Outcome{Start: start, Host: "late.example", Port: 443, Method: "CONNECT"}) // past the limit: not even tried

	b, _ := os.ReadFile(filepath.Join(dir, "journal.ndjson"))
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 5 || string(lines[0]) != "agent line in progress, ended" {
		t.Fatalf("journal:\n%s", b)
	}
	want := []journal.Egress{
		{Start: start.UTC(), Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, BytesOut: 10, BytesIn: 20, DurationMs: 1500},
		{Start: start.UTC(), Host: "evil.example", Port: 80, Method: "GET", Reason: "not on the allowlist"},
		{Note: journal.EgressNoteLimit},
	}
	for i, w := range want {
		r, ok := journal.ParseEgressRecord(lines[i+1], nonce)
		if !ok || r.Egress != w {
			t.Errorf("line %d: %q parsed %v as %+v, want %+v", i+1, lines[i+1], ok, r.Egress, w)
		}
	}
	if _, ok := journal.ParseSentinel(lines[4], nonce); !ok {
		t.Errorf("last line %q is not the sentinel", lines[4])
	}
}
