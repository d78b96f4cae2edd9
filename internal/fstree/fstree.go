package fstree

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Errors a Writer wraps; the message names the path and the reason.
var (
	// ErrUnsafe: a name would write outside the directory, through a
	// link or a file, or replace a directory.
	ErrUnsafe = errors.New("unsafe archive")
	// ErrLimit: a name is over a bound (its length, a component's, its
	// depth) or the disk is full.
	ErrLimit = errors.New("archive over a limit")
	// ErrCorrupt: the filesystem refused a name within the bounds as too
	// long (internal/unpack wraps it for an unreadable archive too).
	ErrCorrupt = errors.New("corrupt archive")
)

const (
	// DefaultMaxDepth bounds the components of a name: real trees are a
	// few dozen deep, and the capture's walk takes no more.
	DefaultMaxDepth = 256
	// MaxPath is the longest name (and link target) taken, Linux's
	// PATH_MAX less its NUL.
	MaxPath = 4095
	// MaxComponent is the longest component of a name (NAME_MAX).
	MaxComponent = 255
)

// Options of a Writer.
type Options struct {
	// MaxDepth bounds the components of a name (0: DefaultMaxDepth).
	MaxDepth int
	// Chown gives what is written to UID and GID (a root worker's
	// sandbox ids); else it is the caller's.
	Chown    bool
	UID, GID int
}

// Clean checks a name and returns it clean and relative ("." for the
// directory itself): an absolute name, one with a ".." component or a
// NUL is refused.
func Clean(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: %s has a NUL byte", ErrUnsafe, Quote(name))
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %s is absolute", ErrUnsafe, Quote(name))
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %s climbs out with ..", ErrUnsafe, Quote(name))
		}
	}
	return path.Clean(name), nil
}

// checkName is Clean with the bounds of a name: at most MaxPath bytes,
// components of at most MaxComponent, at most depth of them. It returns
// the clean name and its components (none for ".").
func checkName(name string, depth int) (string, []string, error) {
	if len(name) > MaxPath {
		return "", nil, fmt.Errorf("%w: the name %s is %d bytes, more than %d", ErrLimit, Quote(name), len(name), MaxPath)
	}
	clean, err := Clean(name)
	if err != nil || clean == "." {
		return clean, nil, err
	}
	parts := strings.Split(clean, "/")
	if len(parts) > depth {
		return "", nil, fmt.Errorf("%w: the name %s is %d levels deep, more than %d", ErrLimit, Quote(name), len(parts), depth)
	}
	for _, p := range parts {
		if len(p) > MaxComponent {
			return "", nil, fmt.Errorf("%w: the name %s has a component of %d bytes, more than %d", ErrLimit, Quote(name), len(p), MaxComponent)
		}
	}
	return clean, parts, nil
}

// Quote shows a name of any bytes on one line, a long one cut short.
func Quote(s string) string {
	if len(s) > 160 {
		return fmt.Sprintf("%q…", s[:120])
	}
	return fmt.Sprintf("%q", s)
}
