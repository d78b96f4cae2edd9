package protocol

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseByteSize parses a size in bytes: an integer, optionally with a
// binary unit ("512KiB", "64MiB", "2GiB", "1TiB", "10B").
func ParseByteSize(s string) (uint64, error) {
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil || num == "" || num[0] == '+' {
		return 0, fmt.Errorf("%q is not a size like 512MiB or 2GiB", s)
	}
	if v > math.MaxUint64>>shift {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v << shift, nil
}
