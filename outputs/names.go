package outputs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/batonhq/baton/protocol"
)

// DiffName is the object name of a run's workspace diff.
func DiffName(runID string) string { return runID + "/diff.patch" }

// FileName is the object name of the workspace file at rel (slash
// separated): named by the hex SHA-256 of rel's bytes, never rel itself,
// since an object's name goes into subjects and a workspace path may be
// longer than a NATS control line (4 KiB). The path is in the object's
// metadata (baton-path) and in the status's Output.Path, escaped.
func FileName(runID, rel string) string {
	sum := sha256.Sum256([]byte(rel))
	return runID + "/files/" + hex.EncodeToString(sum[:])
}

// ErrBadName is returned for an object or escaped name that is malformed.
var ErrBadName = errors.New("outputs: bad name")

// EscapePath makes a workspace path safe as an object name and in JSON: a
// byte that is not part of a printable UTF-8 character, and '%', become
// %XX. A name with a newline or invalid UTF-8 so survives every hop and
// UnescapePath gives back its bytes.
func EscapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		if (r == utf8.RuneError && n <= 1) || r == '%' || !unicode.IsPrint(r) {
			for j := 0; j < n; j++ {
				fmt.Fprintf(&b, "%%%02X", p[i+j])
			}
		} else {
			b.WriteString(p[i : i+n])
		}
		i += n
	}
	return b.String()
}

// UnescapePath reverses EscapePath.
func UnescapePath(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: %q: %% at %d is not followed by two hex digits", ErrBadName, s, i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: %q: %% at %d is not followed by two hex digits", ErrBadName, s, i)
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// SplitOutput tells what output o of run runID is: its kind ("diff" or
// "file") and, for a file, its workspace path (unescaped), which must be
// the one its name is the digest of. An output listed before objects were
// named by digest ("<runId>/files/<escaped path>", no Path) is read by its
// name.
func SplitOutput(runID string, o protocol.Output) (kind, rel string, err error) {
	if o.Name == DiffName(runID) {
		return KindDiff, "", nil
	}
	esc, ok := strings.CutPrefix(o.Name, runID+"/files/")
	if !ok || esc == "" {
		return "", "", fmt.Errorf("%w: %q is not an output of run %s", ErrBadName, o.Name, runID)
	}
	if o.Path == "" {
		rel, err = UnescapePath(esc)
		return KindFile, rel, err
	}
	if rel, err = UnescapePath(o.Path); err != nil {
		return "", "", err
	}
	if FileName(runID, rel) != o.Name {
		return "", "", fmt.Errorf("%w: %q is not the name of the path %q", ErrBadName, o.Name, o.Path)
	}
	return KindFile, rel, nil
}

// Kinds of objects, in an object's "kind" metadata.
const (
	KindDiff    = "diff"
	KindFile    = "file"
	KindSymlink = "symlink"
)
