package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeReadRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want ReadRequest
		bad  bool
	}{
		{body: "", want: ReadRequest{Max: DefaultReadMax}},
		{body: "  ", want: ReadRequest{Max: DefaultReadMax}},
		{body: "{}", want: ReadRequest{Max: DefaultReadMax}},
		{body: `{"from": 7, "max": 10}`, want: ReadRequest{From: 7, Max: 10}},
		{body: `{"from": 7, "max": 1024}`, want: ReadRequest{From: 7, Max: 1024}},
		{body: `{"name": "r1/diff.patch", "from": 3}`, want: ReadRequest{From: 3, Max: DefaultReadMax, Name: "r1/diff.patch"}},
		{body: `{"max": 1025}`, bad: true},
		{body: `{"max": -1}`, bad: true},
		{body: `{"from": -1}`, bad: true},
		{body: `{"from": 1.5}`, bad: true},
		{body: `{"from": "1"}`, bad: true},
		{body: `{"from": 18446744073709551616}`, bad: true},
		{body: `{"filter": "baton.runs.>"}`, bad: true},
		{body: `{"runId": "other"}`, bad: true},
		{body: `{"from": 1}{"from": 2}`, bad: true},
		{body: `{"from": 1} x`, bad: true},
		{body: `null`, bad: true},
		{body: `[]`, bad: true},
		{body: `"x"`, bad: true},
		{body: `{`, bad: true},
		{body: `{"name": "` + strings.Repeat("a", 1025) + `"}`, bad: true},
		{body: `{"from": 1, "pad": "` + strings.Repeat("a", 5000) + `"}`, bad: true},
	} {
		got, err := DecodeReadRequest([]byte(tc.body))
		if tc.bad {
			if !errors.Is(err, ErrBadRead) {
				t.Errorf("%.40q: got %+v, %v; want ErrBadRead", tc.body, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%.40q: got %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
}

func FuzzDecodeReadRequest(f *testing.F) {
	for _, s := range []string{"", "{}", `{"from":1,"max":2}`, `{"name":"a/b"}`, `{"max":99999}`, "null"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReadRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadRead) {
				t.Fatalf("error %v does not wrap ErrBadRead", err)
			}
			return
		}
		if r.Max < 1 || r.Max > MaxReadMax || len(r.Name) > maxReadName {
			t.Fatalf("accepted out of bounds: %+v", r)
		}
	})
}

func TestParseReadSubject(t *testing.T) {
	n := MustNames("")
	for _, tc := range []struct {
		kind, subj, want string
	}{
		{"events", "baton.read.events.r-1", "r-1"},
		{"events", "baton.read.events.r-1.x", ""},
		{"events", "baton.read.events.", ""},
		{"events", "baton.read.status.r-1", ""},
		{"run", "baton.read.run.baton_worker", "baton_worker"},
		{"run", "other.read.run.r", ""},
	} {
		got, ok := n.ParseReadSubject(tc.kind, tc.subj)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s %s: got %q %v, want %q", tc.kind, tc.subj, got, ok, tc.want)
		}
	}
}
