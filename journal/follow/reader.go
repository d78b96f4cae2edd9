package follow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/batonhq/baton/journal"
)

// Reader defaults.
const (
	// DefaultMaxLine is the longest line (without its '\n') handed out whole;
	// a longer one is handed out by its offsets alone.
	DefaultMaxLine = 8 << 20
	// DefaultReadBuffer is the read buffer a reader starts with; it grows
	// toward the max line only while a line needs it.
	DefaultReadBuffer = 256 << 10
)

// ErrOffsetBeyondEnd means a read was asked to start past the journal's end:
// the offset does not come from this journal, or the journal was replaced.
var ErrOffsetBeyondEnd = errors.New("follow: offset beyond the end of the journal")

// Line is one complete journal line.
type Line struct {
	// Data is the line without its terminating '\n' ('\r' kept: bytes are
	// unchanged); valid only until the callback returns; nil when the line
	// is longer than the reader's max line (then read it with ReadAt on the
	// journal file between Start and End-1). An empty line has empty,
	// non-nil Data.
	Data  []byte
	Start int64 // offset of the first byte
	End   int64 // offset just past the '\n'
}

// splitter cuts a byte stream into complete lines without copying them: it
// reads into one buffer and hands out slices of it. Only the partial line at
// the end of the buffer is ever moved, to the front, to make room.
type splitter struct {
	buf     []byte
	r, w    int   // buf[r:w] is read but not handed out
	scan    int   // buf[r:scan] holds no '\n', so the search resumes at scan
	off     int64 // stream offset of buf[r]
	size    int   // the buffer's usual length, gone back to after a long line
	maxLine int
	long    bool  // inside a line longer than maxLine: drop it up to its '\n'
	longAt  int64 // where that line starts
	batch   []Line
}

func newSplitter(off int64, size, maxLine int) *splitter {
	return &splitter{buf: make([]byte, size), off: off, size: size, maxLine: maxLine}
}

// pos is the stream offset just past the last byte read.
func (s *splitter) pos() int64 { return s.off + int64(s.w-s.r) }

// next returns the next complete line in the buffer, if there is one.
func (s *splitter) next() (Line, bool) {
	i := bytes.IndexByte(s.buf[s.scan:s.w], '\n')
	if i < 0 {
		s.scan = s.w
		if !s.long && s.w-s.r > s.maxLine {
			s.long, s.longAt = true, s.off
		}
		if s.long {
			// The caller reads a long line from the file; keeping its bytes
			// would only make the buffer grow without bound.
			s.off += int64(s.w - s.r)
			s.r = s.w
		}
		return Line{}, false
	}
	nl := s.scan + i
	ln := Line{Start: s.off, End: s.off + int64(nl-s.r) + 1}
	switch {
	case s.long:
		ln.Start, s.long = s.longAt, false
	case nl-s.r <= s.maxLine:
		ln.Data = s.buf[s.r:nl:nl] // capped, so an append by the caller cannot overwrite the next line
	}
	s.off = ln.End
	s.r, s.scan = nl+1, nl+1
	return ln, true
}

// compact moves the partial line to the front of the buffer, growing the
// buffer when the partial line fills it and shrinking it back once a long
// line is gone. It invalidates every line handed out.
func (s *splitter) compact() {
	n := s.w - s.r
	switch {
	case n == len(s.buf):
		// next flags a partial line longer than maxLine as long and drops
		// it, so here len(s.buf) <= maxLine and the buffer can grow.
		nb := make([]byte, min(2*len(s.buf), s.maxLine+1))
		copy(nb, s.buf)
		s.buf = nb
	case len(s.buf) > s.size && n < s.size/2:
		nb := make([]byte, s.size)
		copy(nb, s.buf[s.r:s.w])
		s.buf = nb
	case s.r > 0:
		copy(s.buf, s.buf[s.r:s.w])
	}
	s.scan -= s.r
	s.r, s.w = 0, n
}

// slide moves the lines of batch, read but not handed out yet, and the
// partial line after them to the front of the buffer, and points the lines
// at their new place, if that frees at least a quarter of the buffer. A
// line longer than the max line, in batch or being dropped after it, keeps
// batch where it is: its bytes are not in the buffer, so offsets no longer
// tell where the lines are.
func (s *splitter) slide(batch []Line) bool {
	if s.long {
		return false
	}
	for _, ln := range batch {
		if ln.Data == nil {
			return false
		}
	}
	from := s.r - int(s.off-batch[0].Start) // where the first line of batch is in buf
	if from+len(s.buf)-s.w < len(s.buf)/4 {
		return false
	}
	copy(s.buf, s.buf[from:s.w])
	for i, ln := range batch {
		at := int(ln.Start - batch[0].Start)
		batch[i].Data = s.buf[at : at+len(ln.Data) : at+len(ln.Data)]
	}
	s.r, s.scan, s.w = s.r-from, s.scan-from, s.w-from
	return true
}

// pump reads rd until a read returns no bytes (a file at its current end),
// handing the complete lines to fn in batches of at most limit lines. Lines
// stay in place while fn has not seen them, so a batch holds as many lines
// as the buffer does, not one read's worth. When stop reports a line, pump
// delivers the lines before it and returns stopped without delivering it.
// read is the number of bytes read.
func (s *splitter) pump(rd io.Reader, limit int, stop func(Line) bool, fn func([]Line) error) (read int64, stopped bool, err error) {
	batch := s.batch[:0]
	defer func() { s.batch = batch[:0] }()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := fn(batch)
		batch = batch[:0]
		return err
	}
	for {
		for len(batch) < limit {
			ln, ok := s.next()
			if !ok {
				break
			}
			if stop != nil && stop(ln) {
				if err := flush(); err != nil {
					return read, false, err
				}
				return read, true, nil
			}
			batch = append(batch, ln)
		}
		if len(batch) == limit {
			if err := flush(); err != nil {
				return read, false, err
			}
			continue
		}
		// Every complete line is out. Read on behind the pending ones while
		// a fair share of the buffer is free, or once sliding them to the
		// front makes it free: handing over the few lines left after a
		// full batch would cost a whole batch's fixed price (a fenced
		// round trip, a batch staged by the server) for a fraction of its
		// lines. Else hand them over first, since moving the partial line
		// would pull bytes from under them.
		if free := len(s.buf) - s.w; len(batch) > 0 && (free == 0 || free < len(s.buf)/4) && !s.slide(batch) {
			if err := flush(); err != nil {
				return read, false, err
			}
		}
		if len(batch) == 0 {
			s.compact()
		}
		n, rerr := rd.Read(s.buf[s.w:])
		s.w += n
		read += int64(n)
		if n == 0 {
			if err := flush(); err != nil {
				return read, false, err
			}
			if rerr != nil && rerr != io.EOF {
				return read, false, fmt.Errorf("journal: read: %w", rerr)
			}
			return read, false, nil
		}
		// An error with n > 0 comes back on the next read, with n == 0.
	}
}

// ReadLines hands fn each complete line of the journal at path from byte
// offset from, as the file is now, and returns the offset just past the last
// line fn accepted. A partial last line is left for a later read. Lines
// longer than DefaultMaxLine have nil Data. An error from fn stops the read
// and is returned as is.
func ReadLines(path string, from int64, fn func(Line) error) (next int64, err error) {
	if from < 0 {
		return from, fmt.Errorf("%w: negative offset %d", ErrInvalid, from)
	}
	f, err := journal.OpenNoLinks(path, os.O_RDONLY, 0)
	if err != nil {
		return from, fmt.Errorf("journal: read lines: %w", err)
	}
	defer f.Close()
	if err := seekTo(f, from); err != nil {
		return from, err
	}
	next = from
	s := newSplitter(from, DefaultReadBuffer, DefaultMaxLine)
	_, _, err = s.pump(f, 1, nil, func(lines []Line) error {
		if err := fn(lines[0]); err != nil {
			return err
		}
		next = lines[0].End
		return nil
	})
	return next, err
}

// seekTo positions f at off, refusing an offset past its end.
func seekTo(f *os.File, off int64) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal: stat: %w", err)
	}
	if off > st.Size() {
		return fmt.Errorf("%w: offset %d, %s is %d bytes", ErrOffsetBeyondEnd, off, f.Name(), st.Size())
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("journal: seek: %w", err)
	}
	return nil
}
