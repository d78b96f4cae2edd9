package protocol_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestJobWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       *protocol.WorkspaceRef
		err        error
	}{
		{"object", `{"object":"sha256-ab.tar.gz"}`, &protocol.WorkspaceRef{Object: "sha256-ab.tar.gz"}, nil},
		{"unicode name", `{"object":"dépôt/v1.tar"}`, &protocol.WorkspaceRef{Object: "dépôt/v1.tar"}, nil},
		{"longest name", `{"object":"` + strings.Repeat("a", protocol.MaxWorkspaceObjectBytes) + `"}`, &protocol.WorkspaceRef{Object: strings.Repeat("a", protocol.MaxWorkspaceObjectBytes)}, nil},
		{"null", `null`, nil, nil},
		{"empty", `{}`, nil, protocol.ErrInvalidJob},
		{"null object", `{"object":null}`, nil, protocol.ErrInvalidJob},
		{"empty object", `{"object":""}`, nil, protocol.ErrInvalidJob},
		{"long name", `{"object":"` + strings.Repeat("a", protocol.MaxWorkspaceObjectBytes+1) + `"}`, nil, protocol.ErrInvalidJob},
		{"newline", `{"object":"a\nb"}`, nil, protocol.ErrInvalidJob},
		{"NUL", `{"object":"a\u0000b"}`, nil, protocol.ErrInvalidJob},
		{"a string", `"repo.tar"`, nil, protocol.ErrMalformedJob},
		{"a list", `["repo.tar"]`, nil, protocol.ErrMalformedJob},
		{"object number", `{"object":7}`, nil, protocol.ErrMalformedJob},
		{"unknown key", `{"object":"a","digest":"x"}`, nil, protocol.ErrUnknownField},
		{"twice", `{"object":"a","object":"b"}`, nil, protocol.ErrMalformedJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err, mj, merr := decodeWithField(t, "workspace", tc.json)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("json: %v, want %v", err, tc.err)
				}
				if !strings.Contains(err.Error(), "workspace") {
					t.Errorf("json: error %q does not name the field", err)
				}
			} else if err != nil || !reflect.DeepEqual(j.Workspace, tc.want) {
				t.Fatalf("json: %+v, %v", j.Workspace, err)
			}
			j, err = mj, merr
			if tc.err != nil {
				if !errors.Is(err, tc.err) && tc.name != "twice" { // a Go map has no duplicate key
					t.Fatalf("msgpack: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(j.Workspace, tc.want) {
				t.Fatalf("msgpack: %+v, %v", j.Workspace, err)
			}
			if tc.want == nil {
				return
			}
			for _, enc := range []func(protocol.Job) ([]byte, error){protocol.EncodeJob, protocol.EncodeJobMsgpack} {
				b, err := enc(j)
				if err != nil {
					t.Fatal(err)
				}
				ct := ""
				if b[0] != '{' {
					ct = protocol.ContentTypeMsgpack
				}
				back, err := protocol.DecodeJob(b, ct, protocol.Limits{})
				if err != nil || !reflect.DeepEqual(back, j) {
					t.Fatalf("re-encoded %q: %+v, %v", b, back, err)
				}
			}
		})
	}
}
