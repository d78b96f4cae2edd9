package chain

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestReadFrameRejects(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"not JSON", "hello\n"},
		{"cut short", `{"seq":1`},
		{"too long", `{"data":"` + strings.Repeat("A", maxInputFrame) + "\"}\n"},
		{"wrong type", `{"seq":"1"}` + "\n"},
	} {
		var m InputMessage
		if err := ReadFrame(bufio.NewReader(strings.NewReader(tc.in)), &m); err == nil {
			t.Errorf("%s: read %+v", tc.name, m)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte(`{"seq":2,"prev":1,"eof":true,"data":"aGk="}` + "\n"))
	f.Add([]byte(`{"seq":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m InputMessage
		if err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), &m); err != nil {
			return
		}
		// What reads writes back to a frame that reads the same.
		var out bytes.Buffer
		if err := WriteFrame(&out, m); err != nil {
			t.Fatal(err)
		}
		var again InputMessage
		if err := ReadFrame(bufio.NewReader(&out), &again); err != nil || again.Seq != m.Seq || again.Prev != m.Prev ||
			again.EOF != m.EOF || again.Interrupt != m.Interrupt || !bytes.Equal(again.Data, m.Data) {
			t.Fatalf("%q read as %+v, again as %+v (%v)", b, m, again, err)
		}
	})
}
