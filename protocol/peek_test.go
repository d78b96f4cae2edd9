package protocol_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestPeekRunID(t *testing.T) {
	mp, err := protocol.EncodeJobMsgpack(protocol.Job{RunID: "run-mp", Profile: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data, contentType, want string
	}{
		{"job", `{"runId":"run-1","profile":"demo"}`, "", "run-1"},
		{"unknown fields and types", `{"profile":7,"x":[1,{}],"runId":"run-2"}`, "application/json", "run-2"},
		{"escaped", `{"runId":"run\u002d3"}`, "", "run-3"},
		{"msgpack", string(mp), "application/msgpack", "run-mp"},
		{"msgpack with parameters", string(mp), "application/msgpack; v=1", "run-mp"},
		{"cut off", `{"runId": "run-4", "input": "unterminated`, "", "run-4"},
		{"malformed after", `{"runId":"run-5",,,}`, "", "run-5"},
		{"invalid run id", `{"runId":"has space"}`, "", ""},
		{"run id not a string", `{"runId":5}`, "", ""},
		{"cut run id", `{"runId":"run-`, "", ""},
		{"no run id", `{"profile":"demo"}`, "", ""},
		{"runId only as a value", `{"input":"runId"}`, "", ""},
		{"runId inside a value", `{"input":"\"runId\":\"decoy\"","runId":"real"}`, "", "real"},
		{"not JSON", "\x00\xff garbage", "", ""},
		{"empty", "", "", ""},
		{"msgpack that is not", `{"runId":"run-6"}`, "application/msgpack", ""},
		{"beyond the window, malformed", `{"input":"` + strings.Repeat("a", 5000) + `","runId":"late",`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := protocol.PeekRunID([]byte(tc.data), tc.contentType); got != tc.want {
				t.Errorf("PeekRunID(%.60q, %q) = %q, want %q", tc.data, tc.contentType, got, tc.want)
			}
		})
	}
}

func FuzzPeekRunID(f *testing.F) {
	f.Add([]byte(`{"runId":"run-1"}`), "")
	f.Add([]byte(`{"runId": "r`), "")
	f.Add([]byte{0x81, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'x'}, "application/msgpack")
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		if id := protocol.PeekRunID(data, contentType); id != "" && !protocol.ValidRunID(id) {
			t.Fatalf("PeekRunID returned %q, not a valid run id", id)
		}
	})
}
