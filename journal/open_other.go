//go:build !linux

package journal

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// openNoLinks checks with lstat, then opens: racy, but runs happen on
// Linux only; elsewhere only tools read run directories.
func openNoLinks(path string, flag int, perm fs.FileMode) (*os.File, error) {
	path = filepath.Clean(path)
	for _, p := range []string{filepath.Dir(path), path} {
		fi, err := os.Lstat(p)
		if err != nil {
			if p == path && flag&os.O_CREATE != 0 {
				break
			}
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrNotPlain, p)
		}
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotPlain, path)
	}
	return f, nil
}
