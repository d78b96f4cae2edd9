package runid

import "strings"

// MaxLen is the longest run id, in bytes.
const MaxLen = 128

// Valid reports whether id can name a run: one subject token of
// [A-Za-z0-9_-], at most MaxLen bytes.
func Valid(id string) bool { return Chars(id, MaxLen, "_-") }

// Chars reports whether s is 1 to maxLen ASCII letters, digits and bytes of
// extra. Hand-written rather than regexps: a regexp with a {1,128}
// repetition costs a millisecond of start-up in every process of the
// binary, runner stages included.
func Chars(s string, maxLen int, extra string) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}
