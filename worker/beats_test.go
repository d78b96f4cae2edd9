package worker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/sandbox"
)

func TestLeaseTTLFor(t *testing.T) {
	for _, tc := range []struct {
		gap, want time.Duration
	}{
		{300 * time.Millisecond, time.Second},
		{500 * time.Millisecond, time.Second},
		{501 * time.Millisecond, 2 * time.Second},
		{6 * time.Second, 12 * time.Second},
		{12*time.Second + time.Millisecond, 25 * time.Second},
	} {
		if got := leaseTTLFor(tc.gap); got != tc.want {
			t.Errorf("leaseTTLFor(%v) = %v, want %v", tc.gap, got, tc.want)
		}
	}
	// The node: leaseTTL 2s, a worker silent for 12 s.
	if !gapTooLong(12*time.Second, 2*time.Second) || gapTooLong(5*time.Second, 15*time.Second) {
		t.Fatal("gapTooLong misjudges")
	}
}

func TestParseHeartbeatGap(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"valid", `{"gap":6000000000,"at":"2026-12-03T08:00:00Z","leaseTTL":2000000000,"worker":"w"}`, true},
		{"empty", ``, false},
		{"not json", `gap=6s`, false},
		{"truncated", `{"gap":6000000000,"at":"2026-12-03T08`, false},
		{"no gap", `{"at":"2026-12-03T08:00:00Z"}`, false},
		{"negative gap", `{"gap":-1,"at":"2026-12-03T08:00:00Z"}`, false},
		{"no time", `{"gap":6000000000}`, false},
		{"gap as text", `{"gap":"6s","at":"2026-12-03T08:00:00Z"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHeartbeatGap([]byte(tc.in))
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errBadGapRecord)) {
				t.Fatalf("parseHeartbeatGap(%q) = %v, want ok %v", tc.in, err, tc.ok)
			}
		})
	}
}

func FuzzParseHeartbeatGap(f *testing.F) {
	f.Add([]byte(`{"gap":6000000000,"at":"2026-12-03T08:00:00Z","leaseTTL":2000000000,"worker":"w"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseHeartbeatGap(b)
		if err == nil && (g.Gap <= 0 || g.At.IsZero()) {
			t.Fatalf("accepted %q as %+v", b, g)
		}
	})
}

// TestHeartbeatRecord: the longest gap of the week is kept, an older or
// shorter one does not replace it, and doctor's check says what leaseTTL
// the node needs.
func TestHeartbeatRecord(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	if c := HeartbeatCheck(dir, 2*time.Second); c.Severity != sandbox.SevOK {
		t.Fatalf("no record: %+v", c)
	}
	keep := func(g heartbeatGap, want bool) {
		t.Helper()
		if kept, err := recordHeartbeatGap(dir, g); err != nil || kept != want {
			t.Fatalf("record %v: kept %v (%v), want %v", g.Gap, kept, err, want)
		}
	}
	keep(heartbeatGap{Gap: 3 * time.Second, At: now, LeaseTTL: 2 * time.Second, Worker: "w1"}, true)
	keep(heartbeatGap{Gap: 2 * time.Second, At: now.Add(time.Minute), Worker: "w2"}, false)
	keep(heartbeatGap{Gap: 12 * time.Second, At: now.Add(2 * time.Minute), Worker: "w3"}, true)
	c := HeartbeatCheck(dir, 2*time.Second)
	if c.Severity != sandbox.SevWarn || !strings.Contains(c.Fix, "leaseTTL: 24s") || !strings.Contains(c.Detail, "w3") {
		t.Fatalf("a 12 s gap under leaseTTL 2s: %+v", c)
	}
	if c := HeartbeatCheck(dir, 30*time.Second); c.Severity != sandbox.SevOK {
		t.Fatalf("leaseTTL 30s against a 12 s gap: %+v", c)
	}
	// A week on, the record no longer counts, and a shorter gap replaces it.
	later := now.Add(gapsKept + time.Hour)
	if _, ok, err := readHeartbeatGap(dir, later); ok || err != nil {
		t.Fatalf("a record older than %v still counts (%v)", gapsKept, err)
	}
	keep(heartbeatGap{Gap: time.Second, At: later, Worker: "w4"}, true)
	// A garbled record is reported, not taken for none.
	if err := os.WriteFile(filepath.Join(dir, gapsFileName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := HeartbeatCheck(dir, 2*time.Second); c.Severity != sandbox.SevWarn || !strings.Contains(c.Detail, "cannot read") {
		t.Fatalf("garbled record: %+v", c)
	}
}
