package agui_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
)

// fuzzChain reads any bytes as a chain, a message per line: the line's
// first byte picks its kind (low two bits) and headers (a chunk piece, an
// interrupt, the end of input), the rest is its data; the first byte of
// all picks the dialect.
func fuzzChain(data []byte) (agui.Dialect, []agui.Message) {
	kinds := []protocol.RunKind{protocol.KindEvents, protocol.KindRaw, protocol.KindStatus, protocol.KindInput}
	dialects := append([]agui.Dialect{""}, agui.Dialects...)
	var d agui.Dialect
	if len(data) > 0 {
		d = dialects[int(data[0])%len(dialects)]
	}
	var msgs []agui.Message
	for i, line := range bytes.Split(data, []byte("\n")) {
		m := agui.Message{Kind: protocol.KindEvents, Seq: uint64(i + 1), Header: map[string][]string{}, Data: line}
		if len(line) > 0 {
			b := line[0]
			m.Kind, m.Data = kinds[b&3], line[1:]
			if b&4 != 0 {
				m.Header[protocol.HeaderChunk] = []string{fmt.Sprintf("%d/%d", b>>5&3, b>>3&3)}
			}
			if b&0x80 != 0 {
				m.Header[protocol.HeaderInputKind] = []string{protocol.InputKindInterrupt}
			}
			if b&0x40 != 0 {
				m.Header[protocol.HeaderInputEOF] = []string{"true"}
			}
		}
		msgs = append(msgs, m)
	}
	return d, msgs
}

// FuzzProject feeds any bytes as a chain. Properties: no panic; every
// event marshals and the events form a valid AG-UI stream (checkStream);
// resuming after the middle event, by replay and by restored state, gives
// exactly the rest.
func FuzzProject(f *testing.F) {
	for _, fx := range fixtures(f) {
		var b bytes.Buffer
		b.WriteByte(byte(len(fx.Dialect)))
		// Small seeds: the engine minimizes what they grow into byte by
		// byte.
		n := 0
		for _, m := range chain(f, fx.Name) {
			if len(m.Data) > 400 {
				continue
			}
			if n++; n > 16 {
				break
			}
			b.WriteByte('\n')
			b.WriteByte(map[protocol.RunKind]byte{protocol.KindEvents: 0, protocol.KindRaw: 1, protocol.KindStatus: 2, protocol.KindInput: 3}[m.Kind])
			b.Write(bytes.ReplaceAll(m.Data, []byte("\n"), nil))
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte("\x01\n\x02{\"status\":\"waiting\"}\n\x00{\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\"}}}\n\x02{\"status\":\"failed\"}"))
	f.Add([]byte("\x00\n\x2c{\"a\"\n\x4c:1}\n\x03\n\xc3x"))
	f.Fuzz(fuzzProject)
}

func fuzzProject(t *testing.T, data []byte) {
	{
		d, chain := fuzzChain(data)
		opts := []agui.Option{agui.WithDialect(d), agui.WithJobInput([]byte("go")), agui.WithMaxLine(64)}
		p := agui.New("r", opts...)
		var full []agui.Projected
		states := make([][]byte, len(chain))
		for i, m := range chain {
			full = append(full, p.Project(m)...)
			states[i] = p.State()
		}
		if err := checkStream(full, false); err != nil {
			t.Fatal(err)
		}
		if len(full) == 0 {
			return
		}
		at := full[len(full)/2].Pos
		want := golden(t, full[len(full)/2+1:])
		resumed := append(opts, agui.After(at))
		if got := golden(t, project(agui.New("r", resumed...), chain)); !bytes.Equal(got, want) {
			t.Fatalf("replayed after %s:\n%s\nwant\n%s", at, got, want)
		}
		k := 0
		for k < len(chain) && chain[k].Seq < at.Seq {
			k++
		}
		q := agui.New("r", resumed...)
		if k > 0 {
			if err := q.Restore(states[k-1]); err != nil {
				t.Fatal(err)
			}
		}
		if got := golden(t, project(q, chain[k:])); !bytes.Equal(got, want) {
			t.Fatalf("restored before seq %d, after %s:\n%s\nwant\n%s", at.Seq, at, got, want)
		}
	}
}
