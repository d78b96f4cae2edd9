package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf8"
)

// ErrOutputLimit: the agent printed more than the journal's limit (see
// Writer.SetLimit).
var ErrOutputLimit = errors.New("journal: output limit reached")

// Writer appends the agent's stdout to a journal. It writes bytes as they
// arrive, unchanged, and remembers whether the last one ended a line, so
// Finish can end a partial last line before the sentinel.
type Writer struct {
	mu       sync.Mutex // Insert comes from another goroutine than ReadFrom
	f        *os.File
	lastByte byte
	n        int64
	limit    int64 // 0: none
	// pending are lines Insert holds until the agent's current line ends.
	pending [][]byte
	done    bool
	// copied counts the agent's bytes ReadFrom took from its source;
	// after are the lines InsertAfter holds until copied reaches their
	// at; copyEnded is set once ReadFrom returned.
	copied    int64
	after     []afterLine
	copyEnded bool
}

// afterLine is a line InsertAfter holds until the copy has taken at bytes.
type afterLine struct {
	at   int64
	line []byte
}

// SetLimit makes ReadFrom stop at n bytes of journal (the agent's stdout,
// the sentinel aside): it appends what it read up to the n-th byte
// exactly, even in the middle of a line, and returns ErrOutputLimit. A
// line cut there is ended by Finish, like any partial last line. n <= 0
// means no limit.
func (w *Writer) SetLimit(n int64) { w.limit = max(n, 0) }

// OpenWriter opens (creating) path for append, never through a symbolic
// link (see OpenNoLinks). The mode keeps the journal readable by the
// worker only.
func OpenWriter(path string) (*Writer, error) {
	// Read as well as write: a journal that exists is read for how it ends.
	f, err := OpenNoLinks(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("journal: open writer: %w", err)
	}
	w, err := NewWriter(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// NewWriter appends to f, a journal opened for reading and appending (a
// runner that re-execs passes its journal on as a descriptor).
func NewWriter(f *os.File) (*Writer, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: stat: %w", err)
	}
	w := &Writer{f: f, n: st.Size(), lastByte: '\n'}
	if w.n > 0 {
		// A runner restarted on an existing journal must know how it ends.
		var b [1]byte
		if _, err := f.ReadAt(b[:], w.n-1); err == nil {
			w.lastByte = b[0]
		}
	}
	return w, nil
}

// Write appends p whole.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(p)
}

// write is Write with w.mu held. A write that ends a line lets the lines
// Insert holds follow it.
func (w *Writer) write(p []byte) (int, error) {
	if len(w.pending) > 0 {
		if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
			n, err := w.writeRaw(p[:i+1])
			if err != nil {
				return n, err
			}
			if err := w.flushPending(); err != nil {
				return n, err
			}
			m, err := w.writeRaw(p[i+1:])
			return n + m, err
		}
	}
	return w.writeRaw(p)
}

func (w *Writer) flushPending() error {
	for len(w.pending) > 0 {
		if _, err := w.writeRaw(w.pending[0]); err != nil {
			return err
		}
		w.pending = w.pending[1:]
	}
	return nil
}

// Insert appends line (a whole line, '\n' included) between the agent's
// lines: at once when the journal ends with a whole line, else right after
// the agent's line in progress ends (or at Finish), never inside it.
func (w *Writer) Insert(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.insert(line)
}

// InsertAfter is Insert after the agent's output ReadFrom has yet to
// take: queued says how many bytes of it wait in the source (the agent's
// stdout pipe), and the line is held until ReadFrom has taken and
// appended them, then inserted as Insert would; at once if none wait or
// the copy has ended. So a record of something the agent did never goes
// before the lines it printed before doing it, which its pipe may still
// hold, however late the copy runs. That is exact when ReadFrom reads a
// non-blocking file (see lockedReads): queued is asked with w.mu held,
// and such reads take bytes from the source with w.mu held too. The lines
// held are the caller's to bound (the stage's egress records are).
func (w *Writer) InsertAfter(line []byte, queued func() int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := queued()
	if q <= 0 || w.copyEnded || w.done {
		return w.insert(line)
	}
	// copied+q, what the agent wrote, never decreases from one call to
	// the next: after stays in order.
	w.after = append(w.after, afterLine{w.copied + q, line})
	return nil
}

// releaseAfter inserts the lines InsertAfter holds, the copy having
// ended, with w.mu held.
func (w *Writer) releaseAfter() error {
	for len(w.after) > 0 {
		if err := w.insert(w.after[0].line); err != nil {
			return err
		}
		w.after = w.after[1:]
	}
	return nil
}

// insert is Insert with w.mu held.
func (w *Writer) insert(line []byte) error {
	if w.done {
		return errors.New("journal: insert after the sentinel")
	}
	if w.lastByte != '\n' {
		w.pending = append(w.pending, line)
		return nil
	}
	_, err := w.writeRaw(line)
	return err
}

func (w *Writer) writeRaw(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	if n > 0 {
		w.lastByte = p[n-1]
	}
	return n, err
}

// ReadFrom copies r (the agent's stdout pipe) until EOF, appending each read
// as soon as it returns so followers see output with no added latency.
// Once it returns, the lines InsertAfter holds follow what it appended.
func (w *Writer) ReadFrom(r io.Reader) (total int64, err error) {
	buf := make([]byte, 256<<10)
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.copyEnded = true
		if rerr := w.releaseAfter(); rerr != nil && err == nil {
			err = fmt.Errorf("journal: append: %w", rerr)
		}
	}()
	// next reads once and appends what it read.
	next := func() (int, error) {
		n, rerr := r.Read(buf)
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.appendRead(buf[:n], rerr)
	}
	if locked := w.lockedReads(r, buf); locked != nil {
		next = locked
	}
	for {
		n, err := next()
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// appendRead appends p, which a read returned with err, up to the limit,
// and the lines InsertAfter holds where p reaches theirs, with w.mu held.
// It returns how much of p it appended and the error that ends the copy,
// if any: err, the limit's, or the append's.
func (w *Writer) appendRead(p []byte, err error) (int, error) {
	if w.limit > 0 && int64(len(p)) > w.limit-w.n {
		// Up to the limit, exactly; nothing past it.
		p, err = p[:max(w.limit-w.n, 0)], fmt.Errorf("%w: more than %d bytes", ErrOutputLimit, w.limit)
	}
	n := len(p)
	for len(w.after) > 0 && w.after[0].at <= w.copied+int64(len(p)) {
		cut := max(w.after[0].at-w.copied, 0)
		if _, werr := w.write(p[:cut]); werr != nil {
			return 0, fmt.Errorf("journal: append: %w", werr)
		}
		w.copied += cut
		p = p[cut:]
		if werr := w.insert(w.after[0].line); werr != nil {
			return 0, fmt.Errorf("journal: append: %w", werr)
		}
		w.after[0] = afterLine{}
		w.after = w.after[1:]
	}
	if _, werr := w.write(p); werr != nil {
		return 0, fmt.Errorf("journal: append: %w", werr)
	}
	w.copied += int64(len(p))
	return n, err
}

// Size is the journal's length in bytes.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// maxDetail bounds a sentinel's detail (in bytes), so the sentinel stays a
// short line whatever failed: a reader ignores lines over its max line.
const maxDetail = 4096

// Finish ends a partial last line with a newline, appends the sentinel,
// syncs and closes the file. A detail over 4 KiB is cut.
func (w *Writer) Finish(s Sentinel) error {
	s.Detail = clip(s.Detail, maxDetail)
	w.mu.Lock()
	defer w.mu.Unlock()
	// Normally none: the copy ended first.
	if err := w.releaseAfter(); err != nil {
		return fmt.Errorf("journal: append: %w", err)
	}
	w.done = true
	if w.lastByte != '\n' {
		// Ending it lets the lines Insert holds follow.
		if _, err := w.write([]byte{'\n'}); err != nil {
			return fmt.Errorf("journal: end partial line: %w", err)
		}
	}
	if _, err := w.writeRaw(s.Line()); err != nil {
		return fmt.Errorf("journal: write sentinel: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	return w.f.Close()
}

// Close closes the file without a sentinel (the runner failed).
func (w *Writer) Close() error { return w.f.Close() }

// File is the journal's file, for a runner that passes it on.
func (w *Writer) File() *os.File { return w.f }

// clip cuts s to at most n bytes, dropping a character the cut splits.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax-1; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
