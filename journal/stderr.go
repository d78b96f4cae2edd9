package journal

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// StderrTail returns the last maxBytes bytes of the run's stderr sidecar as valid
// UTF-8, for a status a person reads: a multi-byte character cut by the
// start is dropped, other invalid bytes become U+FFFD (so the result can
// be longer than maxBytes). It returns "" if the file is missing or
// unreadable, or is not a plain file of dir (see OpenNoLinks).
func StderrTail(dir Dir, maxBytes int) string {
	if maxBytes <= 0 {
		return ""
	}
	f, err := dir.Open(StderrName, os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	start := max(0, st.Size()-int64(maxBytes))
	b := make([]byte, st.Size()-start)
	n, err := f.ReadAt(b, start)
	if err != nil && err != io.EOF {
		return ""
	}
	b = b[:n]
	if start > 0 {
		// At most three continuation bytes end a character cut by the start.
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
