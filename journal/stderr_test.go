package journal

import (
	"os"
	"testing"
)

// TestStderrTail: the tail is the file's last bytes as valid UTF-8, "" for a
// missing file, whatever the bound.
func TestStderrTail(t *testing.T) {
	dir := Dir(t.TempDir())
	if got := StderrTail(dir, 100); got != "" {
		t.Fatalf("StderrTail of a missing file = %q", got)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(dir.Stderr(), []byte(s), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		data string
		max  int
		want string
	}{
		{"whole", "boom\n", 100, "boom\n"},
		{"tail", "0123456789", 4, "6789"},
		{"cut two-byte char dropped", "aé", 1 + 0, ""},
		{"cut three-byte char dropped", "x€yz", 4, "yz"},
		{"cut four-byte char dropped", "😀ok", 4, "ok"},
		{"whole char kept", "x€yz", 5, "€yz"},
		{"invalid bytes replaced", "a\xffb\xc3", 100, "a\uFFFDb\uFFFD"},
		{"zero max", "abc", 0, ""},
		{"negative max", "abc", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(tt.data)
			if got := StderrTail(dir, tt.max); got != tt.want {
				t.Fatalf("StderrTail(%q, %d) = %q, want %q", tt.data, tt.max, got, tt.want)
			}
		})
	}
}
