package publisher

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonCases = []string{
	// valid
	`{}`, `[]`, `""`, `0`, `-0`, `1`, `-1`, `12.5`, `1e5`, `1E+5`, `-1.5e-5`, `true`, `false`, `null`,
	` {"a" : [1, 2 ,{"b":null}] } `, "\t\n\r[ ]\r\n", `{"a":{"b":{"c":[[[]]]}}}`, `[1,"2",true,false,null,{}]`,
	`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, "\"\xff\xfe invalid utf-8 is accepted\"", `"é"`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	// invalid
	``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a" 1}`,
	`01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `1.5.5`, `[01]`, `NaN`, `Infinity`,
	`tru`, `truex`, `nul`, `nulll`, `True`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01b\"", "\"tab\tinside\"",
	`"\`, `{} {}`, `[] x`, `1 2`, `{"a":1}}`, `[[]`, `[]]`, "\x00", "\v1", "\f1", "\u00a01",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), `[` + strings.Repeat(`{"a":`, 3), `[1 2]`,
	`{"a":1 "b":2}`, `["a" "b"]`, `[true false]`, `{"a":[}`, `{"a":{]}`,
}

func TestValidJSON(t *testing.T) {
	for _, c := range jsonCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.40q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzValidJSON: validJSON and json.Valid agree on every input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		if len(c) < 200 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

var agentLine = []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lorem ipsum dolor sit amet, consectetur adipiscing elit \u00e9 \"quoted\""}},"session_id":"4f9e"}`)

func BenchmarkValidJSON(b *testing.B) {
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(agentLine)))
		for b.Loop() {
			if !validJSON(agentLine) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(agentLine)))
		for b.Loop() {
			if !json.Valid(agentLine) {
				b.Fatal("invalid")
			}
		}
	})
}

// streamValid feeds b to a jsonStream cut at the given points.
func streamValid(b []byte, cuts ...int) bool {
	var s jsonStream
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(b))
		s.write(b[prev:c])
		prev = c
	}
	s.write(b[prev:])
	return s.valid()
}

func TestJSONStream(t *testing.T) {
	for _, c := range jsonCases {
		want := json.Valid([]byte(c))
		if got := streamValid([]byte(c)); got != want {
			t.Errorf("jsonStream(%.40q) = %v, json.Valid says %v", c, got, want)
		}
		for i := range min(len(c), 40) { // every cut near the start, and byte by byte
			if got := streamValid([]byte(c), i, i+1, i+2); got != want {
				t.Errorf("jsonStream(%.40q) cut at %d = %v, json.Valid says %v", c, i, got, want)
			}
		}
	}
}

// FuzzJSONStream: jsonStream, wherever its input is cut, agrees with
// json.Valid.
func FuzzJSONStream(f *testing.F) {
	for _, c := range jsonCases {
		if len(c) < 200 {
			f.Add([]byte(c), uint8(1), uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, cut1, cut2 uint8) {
		if got, want := streamValid(b, int(cut1), int(cut1)+int(cut2)), json.Valid(b); got != want {
			t.Fatalf("jsonStream(%q) cut at %d, %d = %v, json.Valid says %v", b, cut1, int(cut1)+int(cut2), got, want)
		}
	})
}
