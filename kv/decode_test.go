package kv

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/policy"
)

func mustEncode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeMalformed(t *testing.T) {
	valid := mustEncode(t, LeaseRecord{Worker: "w1", Node: "n1", Epoch: 7, State: LeaseHeld, Offset: 42, LastSeq: 9})
	for _, tc := range []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty", nil, "empty value"},
		{"msgpack nil", []byte{0xc0}, "nil value"},
		{"never-used byte", []byte{0xc1}, "revision 3"},
		{"string not a map", mustEncode(t, "held"), "revision 3"},
		{"wrong field type", mustEncode(t, map[string]any{"epoch": "seven"}), "revision 3"},
		{"negative into uint", mustEncode(t, map[string]any{"lastSeq": "x"}), "revision 3"},
		{"truncated", valid[:len(valid)-3], "revision 3"},
		{"trailing bytes", append(append([]byte{}, valid...), 0x01, 0x02), "2 trailing bytes"},
		{"map length lies", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "revision 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode[LeaseRecord]("run-1", 3, tc.in)
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Decode(%x) = %v, want ErrDecode", tc.in, err)
			}
			if !strings.Contains(err.Error(), `key "run-1"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q should name the key, the revision and say %q", err, tc.want)
			}
		})
	}
}

func TestDecodeValid(t *testing.T) {
	// Unknown fields are tolerated so that a newer worker's records stay
	// readable by an older one during a rolling deploy.
	b := mustEncode(t, map[string]any{"worker": "w", "epoch": 3, "state": "released", "offset": 10, "future": []int{1}})
	got, err := Decode[LeaseRecord]("k", 1, b)
	if err != nil {
		t.Fatal(err)
	}
	want := LeaseRecord{Worker: "w", Epoch: 3, State: LeaseReleased, Offset: 10}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	exit := 3
	run := RunRecord{RunID: "r", State: RunRunning, Attempt: 2, ExitCode: &exit, CreatedAt: time.Unix(1700000000, 5).UTC(),
		Labels: map[string]string{"a": "b"}, Offset: 1 << 40, LastSeq: 1 << 50}
	gotRun, err := Decode[RunRecord]("r", 1, mustEncode(t, run))
	if err != nil {
		t.Fatal(err)
	}
	if gotRun.RunID != "r" || *gotRun.ExitCode != 3 || !gotRun.CreatedAt.Equal(run.CreatedAt) ||
		gotRun.Labels["a"] != "b" || gotRun.Offset != run.Offset || gotRun.LastSeq != run.LastSeq {
		t.Fatalf("round trip: got %+v, want %+v", gotRun, run)
	}

	// A run's policy survives the record, as a map a JS client reads by
	// its names.
	pol := RunRecord{RunID: "r", Policy: &policy.Policy{Default: policy.Deny, Allow: []string{"Read"}, Ask: []string{"Bash(git push*)"},
		Deny: []string{"Bash(curl *)"}}, AskTimeout: 45 * time.Second}
	polBytes := mustEncode(t, pol)
	if gotPol, err := Decode[RunRecord]("r", 1, polBytes); err != nil || !reflect.DeepEqual(gotPol.Policy, pol.Policy) || gotPol.AskTimeout != pol.AskTimeout {
		t.Fatalf("policy round trip: got %+v %v, %v", gotPol.Policy, gotPol.AskTimeout, err)
	}
	var asMap map[string]any
	if err := msgpack.Unmarshal(polBytes, &asMap); err != nil || fmt.Sprint(asMap["policy"]) != "map[allow:[Read] ask:[Bash(git push*)] default:deny deny:[Bash(curl *)]]" {
		t.Fatalf("the policy as msgpack: %v, %v", asMap["policy"], err)
	}

	// Records written before the nonce left them still decode; the field
	// is ignored.
	old, err := Decode[RunRecord]("r", 1, mustEncode(t, map[string]any{"runId": "r", "state": "running", "nonce": "n0nce"}))
	if err != nil || old.RunID != "r" || old.State != RunRunning {
		t.Fatalf("record with a nonce: %+v, %v", old, err)
	}
}

func TestWrapMapsServerErrors(t *testing.T) {
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: code, Description: "wrong last sequence"})
	}
	for _, tc := range []struct {
		op   string
		err  error
		want error
	}{
		{"get", jetstream.ErrKeyNotFound, ErrNotFound},
		{"get", jetstream.ErrKeyDeleted, ErrNotFound},
		{"create", fmt.Errorf("%w: key exists", api(10071)), ErrExists},
		{"create", fmt.Errorf("%w: %w", api(10164), jetstream.ErrKeyExists), ErrExists},
		{"update", fmt.Errorf("%w: %w", api(10071), jetstream.ErrKeyRevisionMismatch), ErrConflict},
		{"update", api(10164), ErrConflict}, // by code alone, as older clients return it
		{"delete", api(10071), ErrConflict},
		{"update", api(10059), nil},
		{"update", jetstream.ErrNoStreamResponse, nil},
	} {
		got := wrapErr("B", tc.op, "k", tc.err)
		if !errors.Is(got, tc.err) {
			t.Errorf("%s %v: wrapped error %v lost the original", tc.op, tc.err, got)
		}
		for _, sentinel := range []error{ErrNotFound, ErrExists, ErrConflict} {
			if errors.Is(got, sentinel) != (sentinel == tc.want) {
				t.Errorf("%s %v: errors.Is(%v, %v) = %v", tc.op, tc.err, got, sentinel, !(sentinel == tc.want))
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	exit := 1
	f.Add(mustEncode(f, LeaseRecord{Worker: "w", Node: "n", Epoch: 1, State: LeaseHeld}))
	f.Add(mustEncode(f, RunRecord{RunID: "r", ExitCode: &exit, Labels: map[string]string{"k": "v"}, Deadline: time.Unix(1, 2)}))
	f.Add(mustEncode(f, NodeRecord{ID: "n", Workers: 2, Heartbeat: time.Unix(3, 4)}))
	f.Add([]byte{})
	f.Add([]byte{0xc0})
	f.Add([]byte{0xc1})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa5, 's', 't', 'a', 't', 'e', 0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode[RunRecord](t, b)
		checkDecode[LeaseRecord](t, b)
		checkDecode[NodeRecord](t, b)
	})
}

// checkDecode: no panic, every failure is ErrDecode, and whatever decodes
// re-encodes to bytes that decode to the same encoding again.
func checkDecode[T any](t *testing.T, b []byte) {
	v, err := Decode[T]("k", 1, b)
	if err != nil {
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("Decode(%x): %v is not ErrDecode", b, err)
		}
		return
	}
	b2, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode %+v: %v", v, err)
	}
	v2, err := Decode[T]("k", 1, b2)
	if err != nil {
		t.Fatalf("decode of re-encoded %x: %v", b2, err)
	}
	b3, err := msgpack.Marshal(v2)
	if err != nil || !bytes.Equal(b2, b3) {
		t.Fatalf("unstable encoding: %x then %x (%v)", b2, b3, err)
	}
}
