package runid

import (
	"regexp"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"run-1", true},
		{"A_b-9", true},
		{strings.Repeat("x", MaxLen), true},
		{strings.Repeat("x", MaxLen+1), false},
		{"", false},
		{"a.b", false},
		{"a b", false},
		{"a*", false},
		{"a>", false},
		{"ü", false},
		{"a\x00", false},
	} {
		if got := Valid(tc.id); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// FuzzChars holds the hand-written check to the regexp it replaces.
func FuzzChars(f *testing.F) {
	for _, s := range []string{"run-1", "", "a.b", "ü", strings.Repeat("y", 200)} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), re.MatchString(s); got != want {
			t.Fatalf("Valid(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
