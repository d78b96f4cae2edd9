package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/protocol"
)

func TestJobOutputs(t *testing.T) {
	f := false
	for _, tc := range []struct {
		name, json string
		want       *protocol.JobOutputs
		err        error
	}{
		{"narrow", `{"diff":false,"files":["out/**"]}`, &protocol.JobOutputs{Diff: &f, Files: []string{"out/**"}}, nil},
		{"null", `null`, nil, nil},
		{"empty", `{}`, nil, nil},
		{"null diff", `{"diff":null}`, nil, nil},
		{"not an object", `["out/**"]`, nil, protocol.ErrMalformedJob},
		{"diff not bool", `{"diff":"no"}`, nil, protocol.ErrMalformedJob},
		{"files not list", `{"files":"out/**"}`, nil, protocol.ErrMalformedJob},
		{"unknown key", `{"tar":true}`, nil, protocol.ErrUnknownField},
		{"twice", `{"diff":false,"diff":true}`, nil, protocol.ErrMalformedJob},
		{"empty pattern", `{"files":[""]}`, nil, protocol.ErrInvalidJob},
		{"long pattern", `{"files":["` + strings.Repeat("a", 300) + `"]}`, nil, protocol.ErrInvalidJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err, mj, merr := decodeWithField(t, "outputs", tc.json)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("json: %v, want %v", err, tc.err)
				}
			} else if err != nil || !reflect.DeepEqual(j.Outputs, tc.want) {
				t.Fatalf("json: %+v, %v", j.Outputs, err)
			}
			j, err = mj, merr
			if tc.err != nil {
				if !errors.Is(err, tc.err) && tc.name != "twice" { // a Go map has no duplicate key
					t.Fatalf("msgpack: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(j.Outputs, tc.want) {
				t.Fatalf("msgpack: %+v, %v", j.Outputs, err)
			}
			if tc.want != nil {
				b, err := protocol.EncodeJob(j)
				if err != nil {
					t.Fatal(err)
				}
				back, err := protocol.DecodeJob(b, "", protocol.Limits{})
				if err != nil || !reflect.DeepEqual(back, j) {
					t.Fatalf("re-encoded %s: %+v, %v", b, back, err)
				}
			}
		})
	}
}

// decodeWithField decodes a job whose field has the JSON value js, as JSON
// and as msgpack.
func decodeWithField(t *testing.T, field, js string) (protocol.Job, error, protocol.Job, error) {
	t.Helper()
	j, err := protocol.DecodeJob([]byte(`{"runId":"r","profile":"p","`+field+`":`+js+`}`), "", protocol.Limits{})
	var v any
	if err := msgpack.Unmarshal(mustMsgpack(t, js), &v); err != nil {
		t.Fatal(err)
	}
	mp, merr := msgpack.Marshal(map[string]any{"runId": "r", "profile": "p", field: v})
	if merr != nil {
		t.Fatal(merr)
	}
	mj, merr := protocol.DecodeJob(mp, protocol.ContentTypeMsgpack, protocol.Limits{})
	return j, err, mj, merr
}

// mustMsgpack turns a JSON value into msgpack.
func mustMsgpack(t *testing.T, js string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		return []byte{0xc0}
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
