package outputs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// errNotRegular: the name no longer is a regular file (swapped for a link,
// a FIFO or a directory since it was listed).
var errNotRegular = errors.New("not a regular file")

// openRegular opens the regular file rel of root for reading without
// following a link at its last component (intermediate ones stay inside
// root) and without blocking on a FIFO swapped in, and checks what it
// opened. A file the agent made unreadable is made readable again when we
// own it (a worker that is not root); root reads it anyway.
func openRegular(root *os.Root, rel string) (*os.File, os.FileInfo, error) {
	const flags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
	f, err := root.OpenFile(rel, flags, 0)
	if errors.Is(err, fs.ErrPermission) {
		if cerr := root.Chmod(rel, 0o600); cerr == nil {
			f, err = root.OpenFile(rel, flags, 0)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	return f, st, nil
}

// openDir opens the directory rel of root (a directory the agent made
// unreadable is made readable again when we own it).
func openDir(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrPermission) {
		if cerr := root.Chmod(rel, 0o700); cerr == nil {
			f, err = root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		}
	}
	return f, err
}
