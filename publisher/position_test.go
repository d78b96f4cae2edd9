package publisher

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

var testNames = protocol.MustNames("")

func rawMsg(subject string, data string, kv ...string) *jetstream.RawStreamMsg {
	h := nats.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &jetstream.RawStreamMsg{Subject: subject, Sequence: 17, Header: h, Data: []byte(data)}
}

func TestPositionOfMalformed(t *testing.T) {
	ev := testNames.EventsSubject("r")
	for _, tc := range []struct {
		name string
		msg  *jetstream.RawStreamMsg
		want string
	}{
		{"no offset", rawMsg(ev, "{}"), "is not a byte offset"},
		{"offset not a number", rawMsg(ev, "{}", protocol.HeaderOffset, "12a"), "is not a byte offset"},
		{"negative offset", rawMsg(ev, "{}", protocol.HeaderOffset, "-1"), "is not a byte offset"},
		{"offset overflows", rawMsg(ev, "{}", protocol.HeaderOffset, "9223372036854775808"), "is not a byte offset"},
		{"other run's subject", rawMsg(testNames.EventsSubject("other"), "{}", protocol.HeaderOffset, "1"), "is not one of the run's"},
		{"unknown kind", rawMsg("baton.runs.r.ctl", "{}", protocol.HeaderOffset, "1"), "is not one of the run's"},
		{"chunk without slash", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderChunk, "3"), "Baton-Chunk"},
		{"chunk zero", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderChunk, "0/2"), "Baton-Chunk"},
		{"chunk past n", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderChunk, "3/2"), "Baton-Chunk"},
		{"one chunk", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderChunk, "1/1"), "Baton-Chunk"},
		{"epoch not a number", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderEpoch, "-3"), "is not an epoch"},
		{"chunk junk", rawMsg(ev, "x", protocol.HeaderOffset, "1", protocol.HeaderChunk, "1/2/3"), "Baton-Chunk"},
		{"status not JSON", rawMsg(testNames.StatusSubject("r"), "started", protocol.HeaderOffset, "1"), "status body"},
		{"status wrong type", rawMsg(testNames.StatusSubject("r"), `{"offset":"x"}`, protocol.HeaderOffset, "1"), "status body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := positionOf(testNames, "r", tc.msg)
			if !errors.Is(err, ErrBadPosition) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sequence 17") {
				t.Fatalf("positionOf = %v, want ErrBadPosition saying %q", err, tc.want)
			}
			if p.Seq != 17 || p.Subject != tc.msg.Subject {
				t.Fatalf("position %+v must still say where the chain stands", p)
			}
		})
	}
}

func TestPositionOfValid(t *testing.T) {
	p, err := positionOf(testNames, "r", rawMsg(testNames.RawSubject("r"), "x",
		protocol.HeaderOffset, "1000", protocol.HeaderChunk, "2/3", protocol.HeaderMsgID, "r:1000:2/3", protocol.HeaderEpoch, "77"))
	if err != nil {
		t.Fatal(err)
	}
	want := Position{Seq: 17, Offset: 1000, MsgID: "r:1000:2/3", Subject: "baton.runs.r.raw", Kind: protocol.KindRaw, Chunk: 2, Chunks: 3, Epoch: 77}
	if p != want || !p.Partial() {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	p, err = positionOf(testNames, "r", rawMsg(testNames.StatusSubject("r"), `{"status":"handoff","runId":"r","offset":5}`, protocol.HeaderOffset, "5"))
	if err != nil || p.Status == nil || p.Status.Status != protocol.StatusHandoff || p.Kind != protocol.KindStatus || p.Partial() {
		t.Fatalf("status position %+v, %v", p, err)
	}
}

func TestPiece(t *testing.T) {
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyz!")
	for n := 1; n <= len(line); n++ {
		var joined []byte
		lo, hi := len(line), 0
		file := &fileLine{r: bytes.NewReader(append([]byte("prefix"), line...)), start: 6, length: int64(len(line))}
		for i := 1; i <= n; i++ {
			p, _ := memLine(line).piece(i, n)
			if fp, err := file.piece(i, n); err != nil || !bytes.Equal(fp, p) {
				t.Fatalf("n=%d: piece %d read from a file is %q (%v), in memory %q", n, i, fp, err, p)
			}
			lo, hi = min(lo, len(p)), max(hi, len(p))
			joined = append(joined, p...)
		}
		if !bytes.Equal(joined, line) || hi-lo > 1 {
			t.Fatalf("n=%d: pieces join to %q, sizes %d..%d", n, joined, lo, hi)
		}
	}
	c := &Chain{chunkSize: 10}
	for size, want := range map[int64]int{0: 1, 10: 1, 11: 2, 37: 4, 40: 4, 41: 5, 3 << 30: 322122548} {
		if got := c.chunks(size); got != want {
			t.Errorf("chunks(%d) = %d, want %d", size, got, want)
		}
		n := c.chunks(size)
		for _, i := range []int{1, n} {
			if from, to := pieceBounds(size, i, n); to-from > 10 {
				t.Errorf("size %d: piece %d of %d exceeds the chunk size", size, i, n)
			}
		}
	}
}

func FuzzPosition(f *testing.F) {
	f.Add("baton.runs.r.events", "42", "", []byte(`{"a":1}`))
	f.Add("baton.runs.r.raw", "1000", "2/3", []byte("x"))
	f.Add("baton.runs.r.status", "5", "", []byte(`{"status":"attached","offset":5}`))
	f.Add("baton.runs.r.status", "5", "1/2", []byte(`{`))
	f.Add("baton.runs.other.events", "-1", "0/0", []byte{})
	f.Add("baton.runs.r.events", "+7", "+1/+2", []byte(nil))
	f.Fuzz(func(t *testing.T, subject, offset, chunk string, data []byte) {
		msg := rawMsg(subject, string(data), protocol.HeaderOffset, offset, protocol.HeaderChunk, chunk)
		p, err := positionOf(testNames, "r", msg)
		if p.Seq != 17 {
			t.Fatalf("Seq %d", p.Seq)
		}
		if err != nil {
			if !errors.Is(err, ErrBadPosition) {
				t.Fatalf("error %v is not ErrBadPosition", err)
			}
			return
		}
		if p.Offset < 0 || p.Chunk < 0 || p.Chunk > p.Chunks || (p.Chunks != 0 && p.Chunk == 0) {
			t.Fatalf("inconsistent position %+v", p)
		}
		if (p.Kind == protocol.KindStatus) != (p.Status != nil) {
			t.Fatalf("status %v for kind %s", p.Status, p.Kind)
		}
	})
}
