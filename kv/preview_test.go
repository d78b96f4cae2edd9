package kv_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batonhq/baton/kv"
)

func TestInputPreview(t *testing.T) {
	long := strings.Repeat("a", 1023) + "é" + strings.Repeat("b", 10) // é straddles the 1 KiB cut
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"Fix the failing test", "Fix the failing test"},
		{strings.Repeat("x", 1024), strings.Repeat("x", 1024)},
		{strings.Repeat("x", 1025), strings.Repeat("x", 1024) + "…"},
		{long, strings.Repeat("a", 1023) + "…"},
	} {
		got := kv.InputPreview(tc.in)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("InputPreview(%d bytes) = %d bytes %.20q…, want %d bytes", len(tc.in), len(got), got, len(tc.want))
		}
	}
}
