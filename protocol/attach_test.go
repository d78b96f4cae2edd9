package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeAttachJob(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"handoff", `{"runId":"r-1","reason":"handoff"}`, nil},
		{"recover", `{"runId":"r_2","reason":"recover"}`, nil},
		{"not json", `{runId`, ErrMalformedJob},
		{"array", `["r-1"]`, ErrMalformedJob},
		{"unknown field", `{"runId":"r-1","reason":"handoff","x":1}`, ErrMalformedJob},
		{"trailing", `{"runId":"r-1","reason":"handoff"} {}`, ErrMalformedJob},
		{"bad run id", `{"runId":"a.b","reason":"handoff"}`, ErrBadRunID},
		{"missing run id", `{"reason":"handoff"}`, ErrBadRunID},
		{"bad reason", `{"runId":"r-1","reason":"please"}`, ErrInvalidJob},
		{"oversize", `{"runId":"` + strings.Repeat("a", 5000) + `","reason":"handoff"}`, ErrOversize},
		{"wrong type", `{"runId":7,"reason":"handoff"}`, ErrMalformedJob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := DecodeAttachJob([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeAttachJob(%.40q) = %+v, %v; want %v", tt.in, a, err, tt.want)
			}
			if err == nil {
				back, err := DecodeAttachJob(a.Encode())
				if err != nil || back != a {
					t.Fatalf("round trip: %+v %v", back, err)
				}
			}
		})
	}
}

func FuzzDecodeAttachJob(f *testing.F) {
	f.Add([]byte(`{"runId":"r-1","reason":"handoff"}`))
	f.Add([]byte(`{"runId":"","reason":""}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAttachJob(b)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		back, err := DecodeAttachJob(a.Encode())
		if err != nil || back != a {
			t.Fatalf("accepted %q but round trip gives %+v %v", b, back, err)
		}
	})
}
