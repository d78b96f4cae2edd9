package worker

import (
	"bytes"
	"fmt"
	"os"

	"github.com/batonhq/baton/journal"
)

// readRange reads bytes [from, to) of a journal, never through a link.
func readRange(path string, from, to int64) ([]byte, error) {
	f, err := journal.OpenNoLinks(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, to-from)
	_, err = f.ReadAt(b, from)
	return b, err
}

// lineEndingAt returns the journal line whose newline ends just before end,
// without the newline, scanning back from end for the previous newline.
func lineEndingAt(path string, end int64) ([]byte, error) {
	if end < 1 {
		return nil, fmt.Errorf("no line ends at offset %d", end)
	}
	f, err := journal.OpenNoLinks(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var nl [1]byte
	if _, err := f.ReadAt(nl[:], end-1); err != nil || nl[0] != '\n' {
		return nil, fmt.Errorf("journal has no line ending at offset %d", end)
	}
	const block = 64 << 10
	start := int64(0)
	for pos := end - 1; pos > 0; {
		from := max(0, pos-block)
		b := make([]byte, pos-from)
		if _, err := f.ReadAt(b, from); err != nil {
			return nil, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			start = from + int64(i) + 1
			break
		}
		pos = from
	}
	return readRange(path, start, end-1)
}
