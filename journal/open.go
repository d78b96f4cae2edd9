package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotPlain refuses a run file that is a symbolic link, or not a regular
// file (a directory where one is asked for): whatever planted it, a
// process with the worker's or the runner's privileges never reads or
// writes through it.
var ErrNotPlain = errors.New("journal: not a plain file of the run directory")

// ErrInvalid is a bad argument.
var ErrInvalid = errors.New("journal: invalid argument")

// Open opens the run directory's file name (one path component, such as
// "journal.ndjson") as OpenNoLinks does.
func (d Dir) Open(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, filepath.Separator) {
		return nil, fmt.Errorf("%w: %q is not a file name", ErrInvalid, name)
	}
	return OpenNoLinks(filepath.Join(string(d), name), flag, perm)
}

// OpenNoLinks opens path like os.OpenFile, except that neither the file
// nor its directory may be a symbolic link and the file must be a regular
// file (a directory with O_DIRECTORY): both are resolved beneath the
// directory's parent, so nothing reached through a link an agent could
// plant ever becomes a file root reads, truncates or locks. A link or a
// special file fails with ErrNotPlain. The directories above are the
// operator's (the state dir) and are resolved as usual.
func OpenNoLinks(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := openNoLinks(path, flag, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}
