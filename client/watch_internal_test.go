package client

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/protocol"
)

func TestParseChunk(t *testing.T) {
	for _, tc := range []struct {
		h    string
		i, n int
		ok   bool
	}{
		{"1/1", 1, 1, true},
		{"2/3", 2, 3, true},
		{"10/10", 10, 10, true},
		{"", 0, 0, false},
		{"1", 0, 0, false},
		{"/3", 0, 0, false},
		{"1/", 0, 0, false},
		{"0/3", 0, 0, false},
		{"4/3", 0, 0, false},
		{"-1/3", 0, 0, false},
		{"1/-3", 0, 0, false},
		{"+1/3", 0, 0, false},
		{"1/+3", 0, 0, false},
		{"1/3/5", 0, 0, false},
		{" 1/3", 0, 0, false},
		{"a/b", 0, 0, false},
		{"1/99999999999999999999", 0, 0, false},
	} {
		i, n, err := parseChunk(tc.h)
		if (err == nil) != tc.ok || i != tc.i || n != tc.n {
			t.Errorf("parseChunk(%q) = %d, %d, %v; want %d, %d, ok=%v", tc.h, i, n, err, tc.i, tc.n, tc.ok)
		}
	}
}

func TestParseOffset(t *testing.T) {
	for h, want := range map[string]int64{
		"0": 0, "1234": 1234, "": -1, "-5": -1, "x": -1, "12x": -1, "99999999999999999999": -1,
	} {
		if got := parseOffset(h); got != want {
			t.Errorf("parseOffset(%q) = %d, want %d", h, got, want)
		}
	}
}

func mkPart(subject string, seq uint64, chunk, offset, data string) part {
	h := nats.Header{}
	if chunk != "" {
		h.Set(protocol.HeaderChunk, chunk)
	}
	if offset != "" {
		h.Set(protocol.HeaderOffset, offset)
	}
	return part{subject: subject, seq: seq, header: h, data: []byte(data)}
}

func TestAssembler(t *testing.T) {
	const ev, raw, st = "baton.runs.r.events", "baton.runs.r.raw", "baton.runs.r.status"
	started := string(protocol.Status{Status: protocol.StatusStarted, RunID: "r"}.Marshal())
	type out struct {
		kind   protocol.RunKind
		data   string
		offset int64
		seq    uint64
	}
	for _, tc := range []struct {
		name    string
		parts   []part
		want    []out
		wantErr string // substring; empty means no error
	}{
		{"plain lines", []part{
			mkPart(ev, 1, "", "5", `{"a":1}`),
			mkPart(raw, 2, "", "9", "hey"),
			mkPart(st, 3, "", "9", started),
		}, []out{{"events", `{"a":1}`, 5, 1}, {"raw", "hey", 9, 2}, {"status", started, 9, 3}}, ""},
		{"three chunks", []part{
			mkPart(ev, 4, "1/3", "30", `{"a"`),
			mkPart(ev, 5, "2/3", "30", `:"bc`),
			mkPart(ev, 6, "3/3", "30", `d"}`),
			mkPart(raw, 7, "", "40", "after"),
		}, []out{{"events", `{"a":"bcd"}`, 30, 6}, {"raw", "after", 40, 7}}, ""},
		{"chunked raw line", []part{
			mkPart(raw, 1, "1/2", "9", "ab"),
			mkPart(raw, 2, "2/2", "9", "cd"),
		}, []out{{"raw", "abcd", 9, 2}}, ""},
		{"single piece", []part{mkPart(ev, 1, "1/1", "3", "{}")}, []out{{"events", "{}", 3, 1}}, ""},
		{"no offset header", []part{mkPart(ev, 1, "", "", "{}")}, []out{{"events", "{}", -1, 1}}, ""},
		{"unknown kind passes", []part{mkPart("baton.runs.r.ctl", 1, "", "0", "x")}, []out{{"ctl", "x", 0, 1}}, ""},
		{"subject changes mid-line", []part{
			mkPart(ev, 1, "1/2", "9", "ab"),
			mkPart(raw, 2, "2/2", "9", "cd"),
		}, nil, "is not its piece 2"},
		{"unchunked message mid-line", []part{
			mkPart(ev, 1, "1/2", "9", "ab"),
			mkPart(ev, 2, "", "12", "{}"),
		}, nil, "has 1 of 2 pieces"},
		{"count changes", []part{
			mkPart(ev, 1, "1/3", "9", "ab"),
			mkPart(ev, 2, "2/4", "9", "cd"),
		}, nil, "expected piece 2/3"},
		{"repeated piece", []part{
			mkPart(ev, 1, "1/3", "9", "ab"),
			mkPart(ev, 2, "1/3", "9", "ab"),
		}, nil, "expected piece 2/3"},
		{"starts mid-line", []part{mkPart(ev, 7, "2/3", "9", "cd")}, nil, "first piece is missing"},
		{"bad header", []part{mkPart(ev, 1, "1-3", "9", "cd")}, nil, "bad Baton-Chunk header"},
		{"too large", []part{
			mkPart(ev, 1, "1/2", "9", "0123456789"),
			mkPart(ev, 2, "2/2", "9", "0123456789"),
		}, nil, "larger than 16 bytes"},
		{"bad status", []part{mkPart(st, 1, "", "0", "{")}, nil, "not a status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := assembler{maxLine: 16} // only chunked lines are bounded
			var got []out
			var err error
			for _, p := range tc.parts {
				var e Event
				var ok bool
				e, ok, err = a.add(p)
				if err != nil {
					break
				}
				if ok {
					got = append(got, out{e.Kind, string(e.Data), e.Offset, e.Seq})
					if (e.Kind == protocol.KindStatus) != (e.Status != nil) {
						t.Errorf("event %+v: Status must be set exactly for status messages", e)
					}
				}
			}
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBrokenChunk) && tc.wantErr != "not a status" {
					t.Errorf("error %v does not wrap ErrBrokenChunk", err)
				}
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{"1/1", "2/3", "0/0", "3/2", "-1/2", "+1/2", "1/", "/", "", "9999999999999999999/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		i, n, err := parseChunk(h)
		if err == nil && (i < 1 || i > n) {
			t.Fatalf("parseChunk(%q) accepted %d/%d", h, i, n)
		}
		if err != nil && (i != 0 || n != 0) {
			t.Fatalf("parseChunk(%q) failed but returned %d/%d", h, i, n)
		}
	})
}

// FuzzAssembler feeds arbitrary chunk headers and subjects: the assembler
// must never panic, never emit more bytes than it was given, and emit a
// chunked line only as the concatenation of its pieces.
func FuzzAssembler(f *testing.F) {
	f.Add("1/3|2/3|3/3", "events|events|events", "abc")
	f.Add("1/2||2/2", "events|raw|events", "xy")
	f.Add("2/2|1/1|", "raw|status|events", "{}")
	f.Fuzz(func(t *testing.T, chunks, kinds, data string) {
		hs := bytes.Split([]byte(chunks), []byte("|"))
		ks := bytes.Split([]byte(kinds), []byte("|"))
		a := assembler{maxLine: 64}
		var in, outBytes int
		for i, h := range hs {
			k := "events"
			if i < len(ks) {
				k = string(ks[i])
			}
			p := mkPart("baton.runs.r."+k, uint64(i+1), string(h), fmt.Sprint(i), data)
			in += len(data)
			ev, ok, err := a.add(p)
			if err != nil {
				return
			}
			if ok {
				outBytes += len(ev.Data)
				if ev.Seq != uint64(i+1) {
					t.Fatalf("event seq %d, want the last piece's %d", ev.Seq, i+1)
				}
			}
		}
		if outBytes > in {
			t.Fatalf("emitted %d bytes from %d", outBytes, in)
		}
	})
}

// An egress message comes decoded; a body that is none passes undecoded.
func TestEgressEvent(t *testing.T) {
	const eg = "baton.runs.r.egress"
	a := assembler{maxLine: 1 << 10}
	e, ok, err := a.add(mkPart(eg, 1, "", "40", `{"host":"api.example.com","port":443,"method":"CONNECT","allowed":true,"secret":"","bytesOut":5,"bytesIn":7,"durationMs":3}`))
	if err != nil || !ok || e.Kind != protocol.KindEgress || e.Egress == nil {
		t.Fatalf("egress event %+v, %v, %v", e, ok, err)
	}
	if g := *e.Egress; g.Host != "api.example.com" || g.Port != 443 || !g.Allowed || g.BytesOut != 5 || g.BytesIn != 7 || g.DurationMs != 3 {
		t.Fatalf("decoded %+v", g)
	}
	e, ok, err = a.add(mkPart(eg, 2, "", "41", `not json`))
	if err != nil || !ok || e.Egress != nil || string(e.Data) != "not json" {
		t.Fatalf("undecodable egress event %+v, %v, %v", e, ok, err)
	}
}

// A tool message comes decoded; a body that is none passes undecoded.
func TestToolEvent(t *testing.T) {
	const tl = "baton.runs.r.tool"
	a := assembler{maxLine: 1 << 10}
	e, ok, err := a.add(mkPart(tl, 1, "", "40", `{"call":1,"phase":"call","name":"deploy","args":{"env":"prod"}}`))
	if err != nil || !ok || e.Kind != protocol.KindTool || e.Tool == nil {
		t.Fatalf("tool call event %+v, %v, %v", e, ok, err)
	}
	if m := *e.Tool; m.Call != 1 || m.Phase != "call" || m.Name != "deploy" || string(m.Args) != `{"env":"prod"}` || m.Result != nil {
		t.Fatalf("decoded call %+v", m)
	}
	e, ok, err = a.add(mkPart(tl, 2, "", "80", `{"call":1,"phase":"result","name":"deploy","result":"deployed v42","truncated":true}`))
	if err != nil || !ok || e.Tool == nil || e.Tool.Result == nil || *e.Tool.Result != "deployed v42" || !e.Tool.Truncated || e.Tool.Error != "" {
		t.Fatalf("tool result event %+v (%+v), %v, %v", e, e.Tool, ok, err)
	}
	e, ok, err = a.add(mkPart(tl, 3, "", "120", `{"call":2,"phase":"result","name":"create_pr","error":"tool create_pr failed (409): a PR exists"}`))
	if err != nil || !ok || e.Tool == nil || e.Tool.Result != nil || e.Tool.Error != "tool create_pr failed (409): a PR exists" {
		t.Fatalf("tool error event %+v (%+v), %v, %v", e, e.Tool, ok, err)
	}
	e, ok, err = a.add(mkPart(tl, 4, "", "121", `not json`))
	if err != nil || !ok || e.Tool != nil || string(e.Data) != "not json" {
		t.Fatalf("undecodable tool event %+v, %v, %v", e, ok, err)
	}
}

// A decision input and a prompt line of a run with a policy come with
// their approval headers; an input of a client has none.
func TestApprovalEventHeaders(t *testing.T) {
	a := assembler{maxLine: 1 << 10}
	prompt := mkPart("baton.runs.r.events", 1, "", "40", `{"type":"control_request","request_id":"req-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"git status"}}}`)
	prompt.header.Set(protocol.HeaderApproval, "req-1")
	prompt.header.Set(protocol.HeaderVerdict, "allow")
	prompt.header.Set(protocol.HeaderRule, "allow: Bash(git status*)")
	e, ok, err := a.add(prompt)
	if err != nil || !ok || e.Approval != "req-1" || e.Verdict != "allow" || e.Rule != "allow: Bash(git status*)" || e.DecidedBy != "" || e.InputKind != "" {
		t.Fatalf("prompt event %+v, %v, %v", e, ok, err)
	}
	dec := mkPart("baton.runs.r.input", 2, "", "40", `{"type":"control_response"}`)
	for k, v := range map[string]string{protocol.HeaderInputKind: protocol.InputKindDecision, protocol.HeaderApproval: "req-1",
		protocol.HeaderDecidedBy: protocol.DecidedByPolicy, protocol.HeaderRule: "allow: Bash(git status*)", protocol.HeaderInputSeq: "7"} {
		dec.header.Set(k, v)
	}
	e, ok, err = a.add(dec)
	if err != nil || !ok || e.InputKind != protocol.InputKindDecision || e.Approval != "req-1" || e.DecidedBy != "policy" ||
		e.Rule != "allow: Bash(git status*)" || e.Verdict != "" || e.InputSeq != 7 || e.Interrupt {
		t.Fatalf("decision event %+v, %v, %v", e, ok, err)
	}
	e, ok, err = a.add(mkPart("baton.runs.r.input", 3, "", "41", `hello`))
	if err != nil || !ok || e.InputKind != "" || e.Approval != "" || e.DecidedBy != "" || e.Rule != "" {
		t.Fatalf("plain input event %+v, %v, %v", e, ok, err)
	}
}
