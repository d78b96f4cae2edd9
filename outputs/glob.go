package outputs

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrBadGlob is returned for a files pattern that cannot be used.
var ErrBadGlob = errors.New("outputs: bad glob")

// Bounds of a pattern, so matching stays cheap.
const (
	maxGlobLen   = 256
	maxGlobStars = 3
)

// CheckGlob reports whether pattern is a usable files pattern: a relative
// slash-separated path whose segments are path.Match patterns or "**"
// (any number of segments), with no "." or ".." segment.
func CheckGlob(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("%w: empty pattern", ErrBadGlob)
	}
	if len(pattern) > maxGlobLen {
		return fmt.Errorf("%w: pattern longer than %d bytes", ErrBadGlob, maxGlobLen)
	}
	if strings.Count(pattern, "**") > maxGlobStars {
		// Each "**" multiplies the splits Match tries.
		return fmt.Errorf("%w: %q has more than %d ** segments", ErrBadGlob, pattern, maxGlobStars)
	}
	if strings.HasPrefix(pattern, "/") {
		return fmt.Errorf("%w: %q is absolute; patterns are relative to the workspace", ErrBadGlob, pattern)
	}
	for _, seg := range strings.Split(pattern, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrBadGlob, pattern)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrBadGlob, pattern, seg)
		case "**":
			continue
		}
		if strings.Contains(seg, "**") {
			return fmt.Errorf("%w: %q: ** must be a whole segment", ErrBadGlob, pattern)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadGlob, pattern, err)
		}
	}
	return nil
}

// Match reports whether the workspace path name (slash separated) matches
// pattern, which CheckGlob accepted. "*" and "?" never match "/"; a "**"
// segment matches zero or more whole segments.
func Match(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Collapse runs of "**", then try every split.
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// MatchAny reports whether name matches one of patterns.
func MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}
