package stage

import (
	"fmt"
	"io"
	"os"
)

// stderrLog is the agent's stderr as the run directory keeps it
// (stderr.log): at most max bytes of it, plus a note. A write that would
// take the file past max keeps only the newest max/2 bytes, behind a note
// saying how many went before; only the tail is ever published
// (journal.StderrTail), so the node's disk holds no more than that.
type stderrLog struct {
	f       *os.File // opened O_APPEND: the runner's own stderr writes there too
	max     int64
	dropped int64
	note    int64 // the note's length, at the file's start once it lost its head
}

func newStderrLog(f *os.File, limit uint64) *stderrLog {
	return &stderrLog{f: f, max: int64(limit)}
}

// stderrNote starts a stderr.log that lost its head.
const stderrNote = "baton runner: stderr truncated: its first %d bytes were dropped (limits.stderr keeps %d)\n"

func (l *stderrLog) Write(p []byte) (int, error) {
	st, err := l.f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size+int64(len(p)) <= l.max {
		return l.f.Write(p)
	}
	// The newest half of what the file and p hold together.
	keep := l.max / 2
	var tail []byte
	if int64(len(p)) >= keep {
		tail = p[int64(len(p))-keep:]
	} else {
		from := max(l.note, size-(keep-int64(len(p))))
		tail = make([]byte, size-from, keep)
		n, err := l.f.ReadAt(tail, from)
		if err != nil && err != io.EOF {
			return 0, err
		}
		tail = append(tail[:n], p...)
	}
	l.dropped += size - l.note + int64(len(p)) - int64(len(tail))
	if err := l.f.Truncate(0); err != nil {
		return 0, err
	}
	// Appended at offset 0 now: the file is the note and the tail.
	n, err := fmt.Fprintf(l.f, stderrNote, l.dropped, l.max)
	l.note = int64(n)
	if err != nil {
		return 0, err
	}
	if _, err := l.f.Write(tail); err != nil {
		return 0, err
	}
	return len(p), nil
}

// copyStderr copies the agent's stderr from r into l until every writer
// has closed it. A write that fails (the state disk full) drops what it
// held: the agent never blocks on its stderr. It reports the bytes read
// and the first write error.
func copyStderr(l *stderrLog, r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	var werr error
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if n > 0 {
			if _, e := l.Write(buf[:n]); e != nil && werr == nil {
				werr = e
			}
		}
		if err != nil {
			return total, werr
		}
	}
}
