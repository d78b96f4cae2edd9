package worker

import (
	"bytes"
	"fmt"
	"io"
)

// lineStart returns where the journal line whose newline ends just before
// end starts, scanning back from end a block at a time for the previous
// newline: a line of any length costs one block.
func lineStart(r io.ReaderAt, end int64) (int64, error) {
	if end < 1 {
		return 0, fmt.Errorf("no line ends at offset %d", end)
	}
	var nl [1]byte
	if _, err := r.ReadAt(nl[:], end-1); err != nil || nl[0] != '\n' {
		return 0, fmt.Errorf("journal has no line ending at offset %d", end)
	}
	const block = 64 << 10
	b := make([]byte, block)
	for pos := end - 1; pos > 0; {
		from := max(0, pos-block)
		if _, err := r.ReadAt(b[:pos-from], from); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b[:pos-from], '\n'); i >= 0 {
			return from + int64(i) + 1, nil
		}
		pos = from
	}
	return 0, nil
}
