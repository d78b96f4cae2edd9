package stage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStderrLog: writes of every size keep the file within its cap plus
// the note, its content the newest bytes written, in order.
func TestStderrLog(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name   string
		writes []int
	}{
		{"under", []int{10, 500, 489}},
		{"exactly", []int{1000}},
		{"one over", []int{1000, 1}},
		{"many small", []int{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}},
		{"one huge", []int{10000}},
		{"huge after some", []int{300, 5000, 20}},
		{"half and more", []int{499, 501, 499, 501}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.OpenFile(filepath.Join(t.TempDir(), "stderr.log"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			l := newStderrLog(f, limit)
			var all []byte
			for i, n := range tc.writes {
				p := bytes.Repeat([]byte{byte('a' + i%26)}, n)
				p = append(p[:0:0], p...)
				copy(p, fmt.Sprint(i)) // each write tells where it starts
				if k, err := l.Write(p); err != nil || k != n {
					t.Fatalf("write %d: %d, %v", i, k, err)
				}
				all = append(all, p...)
			}
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if len(all) <= limit {
				if !bytes.Equal(b, all) {
					t.Fatalf("kept %d bytes, want the %d written whole", len(b), len(all))
				}
				return
			}
			note, body, ok := strings.Cut(string(b), "\n")
			wantNote := strings.TrimSuffix(fmt.Sprintf(stderrNote, len(all)-len(body), limit), "\n")
			if !ok || note != wantNote {
				t.Fatalf("note %q, want %q", note, wantNote)
			}
			if len(body) > limit || len(body) < limit/2 || !bytes.HasSuffix(all, []byte(body)) {
				t.Fatalf("kept %d bytes; want the last %d..%d written", len(body), limit/2, limit)
			}
		})
	}
}
