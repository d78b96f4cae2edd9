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
			data := `{"runId":"r","profile":"p","outputs":` + tc.json + `}`
			j, err := protocol.DecodeJob([]byte(data), "", protocol.Limits{})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("json: %v, want %v", err, tc.err)
				}
			} else if err != nil || !reflect.DeepEqual(j.Outputs, tc.want) {
				t.Fatalf("json: %+v, %v", j.Outputs, err)
			}
			// The same in msgpack.
			var v any
			if err := msgpack.Unmarshal(mustMsgpack(t, tc.json), &v); err != nil {
				t.Fatal(err)
			}
			mp, err := msgpack.Marshal(map[string]any{"runId": "r", "profile": "p", "outputs": v})
			if err != nil {
				t.Fatal(err)
			}
			j, err = protocol.DecodeJob(mp, protocol.ContentTypeMsgpack, protocol.Limits{})
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
