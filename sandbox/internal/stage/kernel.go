package stage

import (
	"strconv"
	"strings"
)

// kernelAtLeast reports whether release (uname -r: "6.18.4-foo",
// "6.15", "5.10.0-31-amd64") names Linux major.minor or later. A release
// it cannot read is taken as older: the caller then keeps to what every
// supported kernel does.
func kernelAtLeast(release string, major, minor int) bool {
	maj, rest, ok := strings.Cut(release, ".")
	if !ok {
		return false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		rest = rest[:end]
	}
	m, err1 := strconv.Atoi(maj)
	n, err2 := strconv.Atoi(rest)
	if err1 != nil || err2 != nil {
		return false
	}
	return m > major || m == major && n >= minor
}
