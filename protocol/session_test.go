package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestDecodeSessionForkRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		msg  string // "" when accepted
	}{
		{`{"as":"s2"}`, ""},
		{`{"as":"s2","checkpoint":0,"labels":{"user":"u1"}}`, ""},
		{`{"as":"s 2"}`, `the new session's id "s 2" must match`},
		{`{}`, `the new session's id "" must match`},
		{`{"as":"s2","checkpoint":-1}`, "checkpoint -1 is negative"},
		{`{"as":"s2","nosuch":1}`, `unknown field "nosuch"`},
		{`{"as":"s2"} {}`, "data after the object"},
		{`[]`, "cannot unmarshal array"},
		{`{"as":"s2","labels":{"baton.attempt":"2"}}`, "reserved for baton"},
		{`{"as":"s2","labels":{"":"x"}}`, "keys of 1 to 64 bytes"},
		{`{"as":"s2","checkpoint":"1"}`, "cannot unmarshal string"},
		{`{"as":"` + strings.Repeat("a", 20000) + `"}`, "body of 20009 bytes"},
	} {
		r, err := protocol.DecodeSessionForkRequest([]byte(tc.body))
		if tc.msg == "" {
			if err != nil || r.As != "s2" {
				t.Errorf("%.40s: %+v, %v", tc.body, r, err)
			}
			continue
		}
		if !errors.Is(err, protocol.ErrBadSessionRequest) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%.40s: got %v, want ErrBadSessionRequest with %q", tc.body, err, tc.msg)
		}
	}
}

func FuzzDecodeSessionForkRequest(f *testing.F) {
	f.Add([]byte(`{"as":"s2","checkpoint":3,"labels":{"a":"b"}}`))
	f.Add([]byte(`{"as":"s2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeSessionForkRequest(b)
		if err != nil {
			if !errors.Is(err, protocol.ErrBadSessionRequest) {
				t.Fatalf("error %v is not ErrBadSessionRequest", err)
			}
			return
		}
		if !protocol.ValidSessionID(r.As) || (r.Checkpoint != nil && *r.Checkpoint < 0) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestSessionSubjects(t *testing.T) {
	n := protocol.MustNames("acme")
	for _, op := range []string{"send", "fork", "delete"} {
		subj := map[string]string{"send": n.SessionSendSubject("s1"), "fork": n.SessionForkSubject("s1"), "delete": n.SessionDeleteSubject("s1")}[op]
		if s, ok := n.ParseSessionSubject(op, subj); !ok || s != "s1" {
			t.Errorf("%s: %q parsed as %q, %v", op, subj, s, ok)
		}
		if _, ok := n.ParseSessionSubject(op, "acme.control.session."+op+".a.b"); ok {
			t.Errorf("%s: a subject of two tokens parsed", op)
		}
	}
	if n.SessionJobSubject("s1") != "acme.jobs.session.s1" || n.SessionRequests("fork") != "acme.control.session.fork.*" {
		t.Error("session subjects")
	}
}
