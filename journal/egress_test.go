package journal

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestEgressRecordRoundTrip(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 123456789, time.UTC)
	for _, e := range []Egress{
		{Start: start, Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, BytesOut: 517, BytesIn: 4096, DurationMs: 250},
		{Start: start, Host: "evil.example", Port: 80, Method: "GET", Reason: `name "evil.example" is not on the allowlist`},
		{Note: EgressNoteLimit},
	} {
		r := EgressRecord{Egress: e, Nonce: testNonce}
		line := r.Line()
		if !bytes.HasPrefix(line, egressPrefix) {
			t.Fatalf("%q does not start with %q", line, egressPrefix)
		}
		got, ok := ParseEgressRecord(bytes.TrimSuffix(line, []byte("\n")), testNonce)
		if !ok || got != r {
			t.Fatalf("ParseEgressRecord(%q) = %+v, %v; want %+v", line, got, ok, r)
		}
	}
}

// A record stays a short line whatever host the agent named.
func TestEgressRecordBounded(t *testing.T) {
	long := strings.Repeat("a", 60<<10)
	line := EgressRecord{Egress: Egress{Host: long, Port: 443, Method: "CONNECT", Reason: long}, Nonce: testNonce}.Line()
	if len(line) > 1024 {
		t.Fatalf("record of %d bytes", len(line))
	}
	r, ok := ParseEgressRecord(bytes.TrimSuffix(line, []byte("\n")), testNonce)
	if !ok || len(r.Egress.Host) != maxEgressHost || len(r.Egress.Reason) != maxEgressReason {
		t.Fatalf("parsed %v: host of %d bytes, reason of %d", ok, len(r.Egress.Host), len(r.Egress.Reason))
	}
}

// The message's body holds the documented fields, secret included while
// it is empty (docs/protocol.md).
func TestEgressBody(t *testing.T) {
	r := EgressRecord{Egress: Egress{Start: time.Unix(0, 0).UTC(), Host: "h", Port: 1, Method: "CONNECT", Allowed: true, BytesOut: 2, BytesIn: 3, DurationMs: 4}}
	want := `{"start":"1970-01-01T00:00:00Z","host":"h","port":1,"method":"CONNECT","allowed":true,"secret":"","bytesOut":2,"bytesIn":3,"durationMs":4}`
	if got := string(r.Body()); got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
}

func TestParseEgressRecordRejects(t *testing.T) {
	rec := func(egress, nonce string) string { return `{"__egress":` + egress + `,"__nonce":"` + nonce + `"}` }
	const ok = `{"host":"h","port":443,"method":"CONNECT","allowed":true,"secret":""}`
	if _, parsed := ParseEgressRecord([]byte(rec(ok, testNonce)), testNonce); !parsed {
		t.Fatalf("the well-formed record %s did not parse", rec(ok, testNonce))
	}
	for _, tc := range []struct{ name, line, nonce string }{
		{"other nonce", rec(ok, "0123456789abcdef0123456789abcdef"), testNonce},
		{"no nonce", `{"__egress":` + ok + `}`, testNonce},
		{"empty nonce", rec(ok, ""), ""},
		{"guessed nonce", rec(ok, "guess"), testNonce},
		{"agent line", `{"type":"egress","host":"h"}`, testNonce},
		{"nonce first", `{"__nonce":"` + testNonce + `","__egress":` + ok + `}`, testNonce},
		{"unknown field", rec(`{"host":"h","x":1}`, testNonce), testNonce},
		{"unknown outer field", `{"__egress":` + ok + `,"__nonce":"` + testNonce + `","x":1}`, testNonce},
		{"no host", rec(`{"port":443,"allowed":true}`, testNonce), testNonce},
		{"host and note", rec(`{"host":"h","note":"n"}`, testNonce), testNonce},
		{"port string", rec(`{"host":"h","port":"443"}`, testNonce), testNonce},
		{"port too large", rec(`{"host":"h","port":65536}`, testNonce), testNonce},
		{"negative bytes", rec(`{"host":"h","bytesIn":-1}`, testNonce), testNonce},
		{"negative duration", rec(`{"host":"h","durationMs":-1}`, testNonce), testNonce},
		{"bad start", rec(`{"host":"h","start":"yesterday"}`, testNonce), testNonce},
		{"egress not an object", `{"__egress":1,"__nonce":"` + testNonce + `"}`, testNonce},
		{"two objects", rec(ok, testNonce) + `{}`, testNonce},
		{"truncated", rec(ok, testNonce)[:40], testNonce},
		{"input record", `{"__input":1,"__nonce":"` + testNonce + `","data":""}`, testNonce},
	} {
		if r, parsed := ParseEgressRecord([]byte(tc.line), tc.nonce); parsed {
			t.Errorf("%s: parsed %q as %+v", tc.name, tc.line, r)
		}
	}
}

func FuzzParseEgressRecord(f *testing.F) {
	f.Add([]byte(EgressRecord{Egress: Egress{Host: "h", Port: 443, Method: "CONNECT", Allowed: true, BytesIn: 1}, Nonce: testNonce}.Line()))
	f.Add([]byte(EgressRecord{Egress: Egress{Note: EgressNoteLimit}, Nonce: testNonce}.Line()))
	f.Add([]byte(`{"__egress":{"host":"h"},"__nonce":"guess"}`))
	f.Add([]byte(`{"__egress":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := ParseEgressRecord(bytes.TrimSuffix(line, []byte("\n")), testNonce)
		if !ok {
			return
		}
		if !strings.Contains(string(line), testNonce) {
			t.Fatalf("%q parsed without the run's nonce", line)
		}
		// What parses re-encodes to a record that parses the same.
		again, ok := ParseEgressRecord(bytes.TrimSuffix(r.Line(), []byte("\n")), testNonce)
		if !ok || !again.Egress.Start.Equal(r.Egress.Start) {
			t.Fatalf("%q parsed as %+v, re-encoded as %+v (%v)", line, r, again, ok)
		}
		again.Egress.Start, r.Egress.Start = time.Time{}, time.Time{}
		if again != r {
			t.Fatalf("%q parsed as %+v, re-encoded as %+v", line, r, again)
		}
	})
}
