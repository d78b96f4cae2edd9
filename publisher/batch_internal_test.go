package publisher

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
)

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.12.1", true}, {"2.12.0", false}, {"2.11.9", false}, {"2.15.2", true}, {"3.0.0", true},
		{"2.12.10", true}, {"1.99.99", false}, {"2.12.1-beta.3", true}, {"2.12.0-RC.1", false},
		{"", false}, {"2.12", false}, {"2.x.1", false}, {"v2.12.1", false}, {"2.12.1.4", false}, {"-2.12.1", false},
	} {
		if got := versionAtLeast(tc.v, minBatchServer); got != tc.want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestParseAck(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want pubAck
		err  error  // errors.Is
		code uint16 // an API error's code
	}{
		{"ack", `{"stream":"S","seq":42}`, pubAck{Stream: "S", Sequence: 42}, nil, 0},
		{"duplicate", `{"stream":"S","seq":42,"duplicate":true}`, pubAck{Stream: "S", Sequence: 42, Duplicate: true}, nil, 0},
		{"batch", `{"stream":"S","seq":42,"batch":"b1","count":3}`, pubAck{Stream: "S", Sequence: 42, BatchID: "b1", Count: 3}, nil, 0},
		{"unknown fields", `{"stream":"S","seq":42,"domain":"d","val":"1"}`, pubAck{Stream: "S", Sequence: 42}, nil, 0},
		{"wrong last sequence", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"},"stream":"S","seq":0}`, pubAck{}, nil, 10071},
		{"duplicate in batch", `{"error":{"code":400,"err_code":10201,"description":"atomic publish batch contains duplicate message id"}}`, pubAck{}, nil, 10201},
		{"no stream", `{"seq":42}`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"sequence zero", `{"stream":"S","seq":0}`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"empty", ``, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"not json", `+OK`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"truncated", `{"stream":"S","seq":4`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"negative sequence", `{"stream":"S","seq":-1}`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"sequence a string", `{"stream":"S","seq":"42"}`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"error not an object", `{"error":"boom"}`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
		{"null", `null`, pubAck{}, jetstream.ErrInvalidJSAck, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack, err := parseAck([]byte(tc.data))
			if ack != tc.want {
				t.Errorf("ack %+v, want %+v", ack, tc.want)
			}
			var apiErr *jetstream.APIError
			switch {
			case tc.code != 0:
				if !errors.As(err, &apiErr) || uint16(apiErr.ErrorCode) != tc.code {
					t.Errorf("error %v, want API error %d", err, tc.code)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v", err, tc.err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			}
		})
	}
}

// FuzzParseAck: whatever the server (or someone answering in its place)
// sends, the chain gets a stored sequence or an error, never both; and
// batchSeq accepts only an ack naming the batch and its size.
func FuzzParseAck(f *testing.F) {
	f.Add([]byte(`{"stream":"S","seq":42,"batch":"b1","count":3}`))
	f.Add([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"}}`))
	f.Add([]byte(`{"stream":"S","seq":42,"duplicate":true}`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ack, err := parseAck(data)
		if (err == nil) == (ack.Sequence == 0) {
			t.Fatalf("ack %+v with error %v", ack, err)
		}
		if err != nil {
			return
		}
		seq, err := batchSeq(ack, "b1", 3)
		if err == nil && (seq != ack.Sequence || ack.BatchID != "b1" || ack.Count != 3) {
			t.Fatalf("batch ack %q accepted as %d", data, seq)
		}
	})
}

func TestBatchSeq(t *testing.T) {
	for _, tc := range []struct {
		ack pubAck
		ok  bool
	}{
		{pubAck{Stream: "S", Sequence: 9, BatchID: "b1", Count: 3}, true},
		{pubAck{Stream: "S", Sequence: 9}, false}, // a plain ack: the server ignored the batch
		{pubAck{Stream: "S", Sequence: 9, BatchID: "b2", Count: 3}, false},
		{pubAck{Stream: "S", Sequence: 9, BatchID: "b1", Count: 2}, false},
	} {
		seq, err := batchSeq(tc.ack, "b1", 3)
		if (err == nil) != tc.ok || (tc.ok && seq != 9) {
			t.Errorf("batchSeq(%+v) = %d, %v", tc.ack, seq, err)
		}
		if err != nil && !errors.Is(err, jetstream.ErrInvalidJSAck) {
			t.Errorf("batchSeq(%+v): %v is not ErrInvalidJSAck", tc.ack, err)
		}
	}
}

// TestStoredLine: only a message of this chain's run and epoch whose
// Msg-Id names one of the lines counts as that line.
func TestStoredLine(t *testing.T) {
	c := &Chain{runID: "r", epoch: 3}
	ls := []follow.Line{{Data: []byte("a"), End: 10}, {Data: []byte("b"), End: 20}, {Data: []byte("c"), End: 30}}
	ev := testNames.EventsSubject("r")
	for _, tc := range []struct {
		name  string
		id    string
		epoch string
		want  int
	}{
		{"first", "r:10", "3", 0},
		{"last", "r:30", "3", 2},
		{"other epoch", "r:30", "4", -1},
		{"no epoch", "r:30", "", -1},
		{"not a line of the batch", "r:40", "3", -1},
		{"other run", "rr:30", "3", -1},
		{"a chunk", "r:30:1/2", "3", -1},
		{"a status", "r:status:attached:3:30", "3", -1},
		{"no id", "", "3", -1},
		{"offset with sign", "r:+30", "3", -1},
		{"offset with zeros", "r:030", "3", -1},
		{"offset overflows", "r:99999999999999999999", "3", -1},
	} {
		m := rawMsg(ev, "x", protocol.HeaderMsgID, tc.id, protocol.HeaderEpoch, tc.epoch)
		if got := c.storedLine(m, ls); got != tc.want {
			t.Errorf("%s: storedLine = %d, want %d", tc.name, got, tc.want)
		}
	}
}
