package journal

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const testNonce = "85be979a9cde500b9aa7e513cd00a79f"

func TestParseSentinel(t *testing.T) {
	const other = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name  string
		line  string
		nonce string
		want  *Sentinel
	}{
		{"written by Line", `{"__exit":0,"__nonce":"` + testNonce + `","reason":"exit"}`, testNonce,
			&Sentinel{Exit: 0, Nonce: testNonce, Reason: "exit"}},
		{"TanStack form", `{"__exit":3,"__nonce":"` + testNonce + `"}`, testNonce,
			&Sentinel{Exit: 3, Nonce: testNonce}},
		{"all fields any order", `{"detail":"d \"q\" \u00e9","signal":"SIGKILL","reason":"signal","__nonce":"` + testNonce + `","__exit":-9}`, testNonce,
			&Sentinel{Exit: -9, Nonce: testNonce, Reason: "signal", Signal: "SIGKILL", Detail: `d "q" é`}},
		{"CRLF", `{"__exit":1,"__nonce":"` + testNonce + `"}` + "\r", testNonce,
			&Sentinel{Exit: 1, Nonce: testNonce}},
		{"JSON whitespace", " \t{ \"__exit\" : 2 , \"__nonce\" : \"" + testNonce + "\" } ", testNonce,
			&Sentinel{Exit: 2, Nonce: testNonce}},
		{"minus zero", `{"__exit":-0,"__nonce":"` + testNonce + `"}`, testNonce,
			&Sentinel{Exit: 0, Nonce: testNonce}},
		{"largest int", `{"__exit":9223372036854775807,"__nonce":"` + testNonce + `"}`, testNonce,
			&Sentinel{Exit: 9223372036854775807, Nonce: testNonce}},
		{"usage", `{"__exit":0,"__nonce":"` + testNonce + `","reason":"exit","cpuUserUsec":2000000,"cpuSystemUsec":15,"maxRss":8388608}`, testNonce,
			&Sentinel{Exit: 0, Nonce: testNonce, Reason: "exit", CPUUserUsec: 2000000, CPUSystemUsec: 15, MaxRSS: 8 << 20}},

		{"negative cpu", `{"__exit":0,"__nonce":"` + testNonce + `","cpuUserUsec":-1}`, testNonce, nil},
		{"float rss", `{"__exit":0,"__nonce":"` + testNonce + `","maxRss":1.5}`, testNonce, nil},
		{"string cpu", `{"__exit":0,"__nonce":"` + testNonce + `","cpuSystemUsec":"1"}`, testNonce, nil},
		{"duplicate rss", `{"__exit":0,"__nonce":"` + testNonce + `","maxRss":1,"maxRss":2}`, testNonce, nil},
		{"wrong nonce", `{"__exit":0,"__nonce":"` + other + `"}`, testNonce, nil},
		{"nonce prefix", `{"__exit":0,"__nonce":"` + testNonce[:31] + `"}`, testNonce, nil},
		{"nonce longer", `{"__exit":0,"__nonce":"` + testNonce + `0"}`, testNonce, nil},
		{"nonce elsewhere only", `{"__exit":0,"__nonce":"x","detail":"` + testNonce + `"}`, testNonce, nil},
		{"nonce not a string", `{"__exit":0,"__nonce":["` + testNonce + `"]}`, testNonce, nil},
		{"float exit", `{"__exit":1.5,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"integral float exit", `{"__exit":1.0,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"exponent exit", `{"__exit":1e2,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"string exit", `{"__exit":"0","__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"null exit", `{"__exit":null,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"bool exit", `{"__exit":true,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"object exit", `{"__exit":{},"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"huge exit", `{"__exit":9223372036854775808,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"huge negative exit", `{"__exit":-99999999999999999999999,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"huge exponent", `{"__exit":1e400,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"missing exit", `{"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"missing nonce", `{"__exit":0,"detail":"` + testNonce + `"}`, testNonce, nil},
		{"extra key", `{"__exit":0,"__nonce":"` + testNonce + `","type":"result"}`, testNonce, nil},
		{"duplicate exit", `{"__exit":0,"__nonce":"` + testNonce + `","__exit":1}`, testNonce, nil},
		{"duplicate nonce", `{"__exit":0,"__nonce":"` + testNonce + `","__nonce":"` + other + `"}`, testNonce, nil},
		{"reason not a string", `{"__exit":0,"__nonce":"` + testNonce + `","reason":1}`, testNonce, nil},
		{"null reason", `{"__exit":0,"__nonce":"` + testNonce + `","reason":null}`, testNonce, nil},
		{"array", `[{"__exit":0,"__nonce":"` + testNonce + `"}]`, testNonce, nil},
		{"string", `"` + testNonce + `"`, testNonce, nil},
		{"trailing garbage", `{"__exit":0,"__nonce":"` + testNonce + `"}x`, testNonce, nil},
		{"two objects", `{"__exit":0,"__nonce":"` + testNonce + `"}{}`, testNonce, nil},
		{"trailing comma", `{"__exit":0,"__nonce":"` + testNonce + `",}`, testNonce, nil},
		{"unterminated", `{"__exit":0,"__nonce":"` + testNonce + `"`, testNonce, nil},
		{"single quotes", `{'__exit':0,'__nonce':'` + testNonce + `'}`, testNonce, nil},
		{"leading zero", `{"__exit":01,"__nonce":"` + testNonce + `"}`, testNonce, nil},
		{"embedded newline", "{\"__exit\":0,\n\"__nonce\":\"" + testNonce + "\"}\nx", testNonce, nil},
		{"empty", ``, testNonce, nil},
		{"empty nonce argument", `{"__exit":0,"__nonce":""}`, "", nil},
		{"nonce with a quote", `{"__exit":0,"__nonce":"a\"b"}`, `a"b`, nil},
		{"nonce too long", `{"__exit":0,"__nonce":"` + strings.Repeat("a", 257) + `"}`, strings.Repeat("a", 257), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseSentinel([]byte(tt.line), tt.nonce)
			if tt.want == nil {
				if ok {
					t.Fatalf("ParseSentinel(%q) = %+v, want no sentinel", tt.line, got)
				}
				return
			}
			if !ok {
				t.Fatalf("ParseSentinel(%q): no sentinel, want %+v", tt.line, *tt.want)
			}
			if got != *tt.want {
				t.Fatalf("ParseSentinel(%q) = %+v, want %+v", tt.line, got, *tt.want)
			}
		})
	}
}

func TestSentinelLineRoundTrip(t *testing.T) {
	for _, s := range []Sentinel{
		{Exit: 0, Nonce: NewNonce(), Reason: ReasonExit},
		{Exit: 137, Nonce: NewNonce(), Reason: ReasonSignal, Signal: "SIGKILL"},
		{Exit: 0, Nonce: NewNonce(), Reason: ReasonExit, CPUUserUsec: 1_500_000, CPUSystemUsec: 20_000, MaxRSS: 12 << 20},
		{Exit: -1, Nonce: "a-b_c.d~e+f/g=", Reason: ReasonError, Detail: "<sandbox> & \"pasta\"\n\x00 failed \xff"},
	} {
		line := s.Line()
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("Line() = %q: want exactly one '\\n', at the end", line)
		}
		got, ok := ParseSentinel(line[:len(line)-1], s.Nonce)
		if !ok {
			t.Fatalf("ParseSentinel(%q) failed", line)
		}
		want := s
		want.Detail = strings.ToValidUTF8(want.Detail, "\uFFFD") // JSON carries text
		if got != want {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
		if _, ok := ParseSentinel(line[:len(line)-1], NewNonce()); ok {
			t.Fatalf("ParseSentinel(%q) with another nonce succeeded", line)
		}
	}
}

func TestNewNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := NewNonce()
		if len(n) != 32 || !validNonce(n) {
			t.Fatalf("NewNonce() = %q: want 32 valid characters", n)
		}
		if seen[n] {
			t.Fatalf("NewNonce() repeated %q", n)
		}
		seen[n] = true
	}
}

func FuzzParseSentinel(f *testing.F) {
	f.Add([]byte(`{"__exit":0,"__nonce":"`+testNonce+`","reason":"exit"}`), testNonce)
	f.Add([]byte(`{"__exit":1.5,"__nonce":"`+testNonce+`"}`), testNonce)
	f.Add([]byte(`{"__exit":0,"__nonce":"`+testNonce+`","__exit":1}`), testNonce)
	f.Add([]byte(`{"__exit":0,"__nonce":"x","detail":"`+testNonce+`"}`), testNonce)
	f.Add([]byte(`{"__exit":0,"__nonce":"ab"}`+"\r"), "ab")
	f.Add([]byte(`{"type":"assistant","message":{"content":[]}}`), testNonce)
	f.Add([]byte("\xff\xfe{"), "a")
	f.Fuzz(func(t *testing.T, line []byte, nonce string) {
		s, ok := ParseSentinel(line, nonce)
		if !ok {
			return
		}
		// Whatever it accepts is one JSON object holding the nonce verbatim,
		// with the right keys and an integer exit equal to the decoded one.
		if !validNonce(nonce) || s.Nonce != nonce || !bytes.Contains(line, []byte(nonce)) {
			t.Fatalf("accepted %q for nonce %q: %+v", line, nonce, s)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("accepted %q, which is not a JSON object: %v", line, err)
		}
		for k := range m {
			switch k {
			case "__exit", "__nonce", "reason", "signal", "detail":
			default:
				t.Fatalf("accepted %q with key %q", line, k)
			}
		}
		var exit int
		if err := json.Unmarshal(m["__exit"], &exit); err != nil || exit != s.Exit {
			t.Fatalf("accepted %q: exit %d, decoded %d (%v)", line, s.Exit, exit, err)
		}
		// And it reads back what it writes.
		again, ok := ParseSentinel(bytes.TrimSuffix(s.Line(), []byte("\n")), nonce)
		if !ok || again != s {
			t.Fatalf("Line of %+v reads back as %+v, %v", s, again, ok)
		}
	})
}
