package follow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/journal"
)

// chunkReader hands out src in chunks of the given sizes, cycling; a size
// of 0 is a pause: a read of nothing, as a file gives at its current end.
type chunkReader struct {
	src   []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.src) == 0 {
		return 0, io.EOF
	}
	n := len(r.src)
	if len(r.sizes) > 0 {
		n = r.sizes[r.i%len(r.sizes)]
		r.i++
	}
	n = min(n, len(p), len(r.src))
	copy(p, r.src[:n])
	r.src = r.src[n:]
	return n, nil
}

// split runs a splitter over input (whose first byte is at offset from) read
// in the given chunks, and returns the lines with their Data copied. Inside
// each batch it checks every line against input, which proves a batch's
// lines all stay intact until fn returns.
func split(t testing.TB, input []byte, from int64, sizes []int, bufSize, maxLine, batch int) []Line {
	t.Helper()
	s := newSplitter(from, bufSize, maxLine)
	rd := &chunkReader{src: input, sizes: sizes}
	var out []Line
	fn := func(lines []Line) error {
		if len(lines) == 0 || len(lines) > batch {
			t.Fatalf("batch of %d lines, limit %d", len(lines), batch)
		}
		for _, ln := range lines {
			want := input[ln.Start-from : ln.End-1-from]
			if ln.Data != nil && !bytes.Equal(ln.Data, want) {
				t.Fatalf("line [%d,%d) in its batch = %q, want %q", ln.Start, ln.End, ln.Data, want)
			}
			if cap(ln.Data) != len(ln.Data) {
				t.Fatalf("line [%d,%d): cap %d > len %d lets an append overwrite the buffer", ln.Start, ln.End, cap(ln.Data), len(ln.Data))
			}
			c := ln
			if ln.Data != nil {
				c.Data = append([]byte{}, ln.Data...)
			}
			out = append(out, c)
		}
		return nil
	}
	for guard := 0; ; guard++ {
		// Each cycle through sizes reads a byte at least.
		if guard > (len(input)+2)*(len(sizes)+1) {
			t.Fatal("splitter makes no progress")
		}
		if _, _, err := s.pump(rd, batch, nil, fn); err != nil {
			t.Fatal(err)
		}
		if len(rd.src) == 0 {
			// One more pump sees the end with everything read.
			if _, _, err := s.pump(rd, batch, nil, fn); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
}

// checkLines asserts lines are exactly input's complete lines from offset
// from: contiguous, each ending in '\n', Data equal to the bytes (nil iff
// longer than maxLine), and the last one ending at input's last '\n'.
func checkLines(t testing.TB, input []byte, from int64, lines []Line, maxLine int) {
	t.Helper()
	at := from
	for i, ln := range lines {
		if ln.Start != at || ln.End <= ln.Start || ln.End > from+int64(len(input)) {
			t.Fatalf("line %d spans [%d,%d), want it to start at %d", i, ln.Start, ln.End, at)
		}
		raw := input[ln.Start-from : ln.End-from]
		if raw[len(raw)-1] != '\n' || bytes.IndexByte(raw[:len(raw)-1], '\n') >= 0 {
			t.Fatalf("line %d = %q is not one line", i, raw)
		}
		long := len(raw)-1 > maxLine
		switch {
		case long && ln.Data != nil:
			t.Fatalf("line %d is %d bytes, over the max %d, yet has Data", i, len(raw)-1, maxLine)
		case !long && ln.Data == nil:
			t.Fatalf("line %d (%q) has nil Data", i, raw)
		case !long && !bytes.Equal(ln.Data, raw[:len(raw)-1]):
			t.Fatalf("line %d = %q, want %q", i, ln.Data, raw[:len(raw)-1])
		}
		at = ln.End
	}
	if want := from + int64(bytes.LastIndexByte(input, '\n')+1); at != want {
		t.Fatalf("lines end at %d, want %d (input %q)", at, want, input)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		from    int64
		maxLine int
		want    []string // Data of each line; "<nil>" for a long one
	}{
		{"empty", "", 0, 100, nil},
		{"partial only", "abc", 0, 100, nil},
		{"one line", "abc\n", 0, 100, []string{"abc"}},
		{"partial last line kept back", "a\nb\nc", 0, 100, []string{"a", "b"}},
		{"empty lines", "\n\n\n", 0, 100, []string{"", "", ""}},
		{"CRLF kept", "a\r\nb\r\n\r\n", 0, 100, []string{"a\r", "b\r", "\r"}},
		{"lone CR is not an end", "a\rb\n", 0, 100, []string{"a\rb"}},
		{"invalid UTF-8 unchanged", "\xff\xfe\x80\n\xc3\n", 0, 100, []string{"\xff\xfe\x80", "\xc3"}},
		{"multi-byte", "é€😀\n", 0, 100, []string{"é€😀"}},
		{"NUL bytes", "a\x00b\n", 0, 100, []string{"a\x00b"}},
		{"from an offset", "x\nyz\n", 1000, 100, []string{"x", "yz"}},
		{"exactly the max", "1234\n", 0, 4, []string{"1234"}},
		{"one over the max", "12345\nab\n", 0, 4, []string{"<nil>", "ab"}},
		{"long lines in a row", "123456789\n123456789\n\n", 0, 4, []string{"<nil>", "<nil>", ""}},
		{"long partial line", "ab\n123456789", 0, 4, []string{"ab"}},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{1, 3, 64} {
			for _, sizes := range [][]int{nil, {1}, {2, 0, 3}} {
				t.Run(fmt.Sprintf("%s/buf%d/chunks%v", tt.name, bufSize, sizes), func(t *testing.T) {
					lines := split(t, []byte(tt.input), tt.from, sizes, bufSize, tt.maxLine, 2)
					var got []string
					for _, ln := range lines {
						if ln.Data == nil {
							got = append(got, "<nil>")
						} else {
							got = append(got, string(ln.Data))
						}
					}
					if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
						t.Fatalf("lines %q, want %q", got, tt.want)
					}
					checkLines(t, []byte(tt.input), tt.from, lines, tt.maxLine)
				})
			}
		}
	}
}

// TestSplitEveryBoundary cuts one input at every point, and in chunks of
// every size, with buffers and limits small enough to make the buffer
// grow, shrink and skip long lines.
func TestSplitEveryBoundary(t *testing.T) {
	input := []byte("{\"a\":1}\r\n\n\xe2\x82\xac\xf0\x9f\x98\x80\nthis line is rather long\n\xff\x00\nx\n\n0123456789abcdef\nlast partial é")
	for _, maxLine := range []int{3, 8, 1 << 20} {
		for _, bufSize := range []int{1, 2, 5, 16, 4096} {
			for _, batch := range []int{1, 3, 512} {
				for cut := 0; cut <= len(input); cut++ {
					// Two chunks with a pause between them, as a follower
					// that reads, waits, and reads again sees the file.
					lines := split(t, input, 7, []int{cut, 0, len(input)}, bufSize, maxLine, batch)
					checkLines(t, input, 7, lines, maxLine)
				}
				for size := 1; size <= len(input); size++ {
					lines := split(t, input, 0, []int{size}, bufSize, maxLine, batch)
					checkLines(t, input, 0, lines, maxLine)
				}
			}
		}
	}
}

// TestSplitBufferReturnsToSize proves the buffer shrinks back after a long
// line made it grow, so a follower does not keep megabytes per run.
func TestSplitBufferReturnsToSize(t *testing.T) {
	input := append(bytes.Repeat([]byte("x"), 1000), '\n')
	input = append(input, "a\nb\n"...)
	s := newSplitter(0, 16, 4096)
	rd := &chunkReader{src: input, sizes: []int{100, 0}}
	var n int
	for len(rd.src) > 0 {
		if _, _, err := s.pump(rd, 512, nil, func(l []Line) error { n += len(l); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.pump(rd, 512, nil, func(l []Line) error { n += len(l); return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d lines, want 3", n)
	}
	if len(s.buf) != 16 {
		t.Fatalf("buffer is %d bytes after the long line, want back to 16", len(s.buf))
	}
}

// A backlog goes out in full batches: the lines left in the buffer after
// one are not handed over alone when it fills, but slid to its front with
// the partial line and joined by the bytes read next.
func TestSplitFullBatches(t *testing.T) {
	var input []byte
	for i := range 1000 {
		input = fmt.Appendf(input, "line %04d\n", i) // 10 bytes
	}
	const batch = 20 // 200 bytes: a 256-byte buffer holds one and a bit
	s := newSplitter(0, 256, 100)
	rd := &chunkReader{src: input}
	var sizes []int
	var at int64
	fn := func(lines []Line) error {
		sizes = append(sizes, len(lines))
		for _, ln := range lines {
			if want := input[ln.Start : ln.End-1]; ln.Start != at || !bytes.Equal(ln.Data, want) {
				t.Fatalf("line [%d,%d) = %q, want %q from %d", ln.Start, ln.End, ln.Data, want, at)
			}
			at = ln.End
		}
		return nil
	}
	if _, _, err := s.pump(rd, batch, nil, fn); err != nil {
		t.Fatal(err)
	}
	if at != int64(len(input)) {
		t.Fatalf("lines up to %d, want %d", at, len(input))
	}
	for i, n := range sizes {
		if n != batch {
			t.Fatalf("batch %d of %d has %d lines, want %d each (sizes %v)", i+1, len(sizes), n, batch, sizes)
		}
	}
}

func TestSplitZeroCopy(t *testing.T) {
	input := []byte("first\nsecond\n")
	s := newSplitter(0, 64, 100)
	if _, _, err := s.pump(bytes.NewReader(input), 512, nil, func(lines []Line) error {
		for _, ln := range lines {
			if &ln.Data[0] != &s.buf[ln.Start] {
				t.Fatalf("line %q is a copy, not a slice of the read buffer", ln.Data)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, dir string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, "journal.ndjson")
	if err := os.WriteFile(p, data, 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLines(t *testing.T) {
	data := []byte("one\ntwo\r\n\nthree partial")
	p := writeFile(t, t.TempDir(), data)
	var got []string
	next, err := ReadLines(p, 0, func(ln Line) error {
		got = append(got, string(ln.Data))
		return nil
	})
	if err != nil || next != 10 || fmt.Sprint(got) != fmt.Sprint([]string{"one", "two\r", ""}) {
		t.Fatalf("ReadLines = %q, next %d, %v", got, next, err)
	}

	// From the middle of a line: its tail is a line of its own; callers pass line starts.
	got = nil
	next, err = ReadLines(p, 4, func(ln Line) error {
		if ln.Start != 4 && ln.Start != 9 {
			t.Fatalf("line starts at %d", ln.Start)
		}
		got = append(got, string(ln.Data))
		return nil
	})
	if err != nil || next != 10 || len(got) != 2 {
		t.Fatalf("ReadLines from 4 = %q, next %d, %v", got, next, err)
	}

	// At the end: nothing, no error.
	if next, err := ReadLines(p, int64(len(data)), func(Line) error { t.Fatal("line at the end"); return nil }); err != nil || next != int64(len(data)) {
		t.Fatalf("ReadLines at the end: next %d, %v", next, err)
	}

	// fn's error stops the read and comes back as is; next is past the last accepted line.
	stop := errors.New("stop")
	next, err = ReadLines(p, 0, func(ln Line) error {
		if ln.Start == 4 {
			return stop
		}
		return nil
	})
	if err != stop || next != 4 {
		t.Fatalf("ReadLines with a failing fn: next %d, %v; want 4, stop", next, err)
	}

	if _, err := ReadLines(p, int64(len(data))+1, func(Line) error { return nil }); !errors.Is(err, ErrOffsetBeyondEnd) {
		t.Fatalf("ReadLines past the end: %v, want ErrOffsetBeyondEnd", err)
	}
	if _, err := ReadLines(p, -1, func(Line) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReadLines from -1: %v, want ErrInvalid", err)
	}
	if _, err := ReadLines(filepath.Join(t.TempDir(), "none"), 0, func(Line) error { return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadLines of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestReadLinesHugeLine reads a line over DefaultMaxLine: it comes with nil
// Data and offsets that find its bytes in the file.
func TestReadLinesHugeLine(t *testing.T) {
	huge := bytes.Repeat([]byte("0123456789abcdef"), (DefaultMaxLine+1000)/16)
	data := append([]byte("small\n"), huge...)
	data = append(data, "\nafter\n"...)
	p := writeFile(t, t.TempDir(), data)
	var lines []Line
	next, err := ReadLines(p, 0, func(ln Line) error {
		c := ln
		c.Data = bytes.Clone(ln.Data)
		lines = append(lines, c)
		return nil
	})
	if err != nil || next != int64(len(data)) {
		t.Fatalf("ReadLines: next %d, %v", next, err)
	}
	checkLines(t, data, 0, lines, DefaultMaxLine)
	if len(lines) != 3 || lines[1].Data != nil {
		t.Fatalf("want 3 lines, the middle one without Data: %d", len(lines))
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, lines[1].End-1-lines[1].Start)
	if _, err := f.ReadAt(got, lines[1].Start); err != nil || !bytes.Equal(got, huge) {
		t.Fatalf("the long line read back from its offsets differs (%v)", err)
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n\xff\xfe\nlong line here\npartial"), []byte{1, 0, 3}, uint8(4), uint8(5), uint8(2))
	f.Add([]byte("é€😀\n😀\n"), []byte{1}, uint8(1), uint8(3), uint8(1))
	f.Add([]byte("\n\n\n"), []byte{}, uint8(0), uint8(0), uint8(0))
	f.Add([]byte(`{"__exit":0,"__nonce":"x"}`+"\n"), []byte{5, 0, 0, 7}, uint8(9), uint8(200), uint8(255))
	f.Fuzz(func(t *testing.T, input, chunks []byte, bufSize, maxLine, batch uint8) {
		sizes := make([]int, len(chunks))
		for i, c := range chunks {
			sizes[i] = int(c % 32)
		}
		if len(sizes) > 0 && sizes[0] == 0 {
			sizes[0] = 1 // a reader that only ever pauses never ends
		}
		ml := int(maxLine%64) + 1
		lines := split(t, input, 3, sizes, int(bufSize%80)+1, ml, int(batch%8)+1)
		checkLines(t, input, 3, lines, ml)
		// The delivered lines, with their '\n', rebuild the input up to its
		// last '\n' byte for byte.
		var rebuilt []byte
		for _, ln := range lines {
			if ln.Data == nil {
				rebuilt = append(rebuilt, input[ln.Start-3:ln.End-1-3]...)
			} else {
				rebuilt = append(rebuilt, ln.Data...)
			}
			rebuilt = append(rebuilt, '\n')
		}
		if want := input[:bytes.LastIndexByte(input, '\n')+1]; !bytes.Equal(rebuilt, want) {
			t.Fatalf("rebuilt %q, want %q", rebuilt, want)
		}
	})
}

// benchLines is an agent's stream: NDJSON lines of about 200 bytes.
func benchLines(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"assistant","seq":%d,"message":{"role":"assistant","content":[{"type":"text","text":"%s"}]}}`+"\n",
			i, strings.Repeat("lorem ipsum ", 9))
	}
	return []byte(b.String())
}

func BenchmarkSplit(b *testing.B) {
	input := benchLines(10000)
	sentinel, _ := journal.NewSentinelMatcher(journal.NewNonce())
	for _, bc := range []struct {
		name string
		stop func(Line) bool
	}{
		{"lines", nil},
		{"lines+sentinel-check", func(ln Line) bool { _, ok := sentinel.Match(ln.Data); return ok }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			b.ReportAllocs()
			s := newSplitter(0, DefaultReadBuffer, DefaultMaxLine)
			rd := bytes.NewReader(input)
			var lines int
			fn := func(l []Line) error { lines += len(l); return nil }
			for b.Loop() {
				rd.Reset(input)
				s.off = 0
				if _, _, err := s.pump(rd, DefaultBatch, bc.stop, fn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// TestReadLinesFollowsNoLink: a journal file planted as a link to a secret
// file is refused, never read.
func TestReadLinesFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := journal.Dir(filepath.Join(root, "run"))
	if err := os.Mkdir(string(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, dir.Journal()); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLines(dir.Journal(), 0, func(Line) error { return nil }); !errors.Is(err, journal.ErrNotPlain) {
		t.Fatalf("ReadLines through a link = %v, want ErrNotPlain", err)
	}
}
