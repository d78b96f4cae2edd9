package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func openNoLinks(path string, flag int, perm fs.FileMode) (*os.File, error) {
	path = filepath.Clean(path)
	dir := filepath.Dir(path)
	rel := filepath.Join(filepath.Base(dir), filepath.Base(path))
	parent, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	how := unix.OpenHow{
		Flags:   uint64(flag) | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flag&unix.O_PATH == 0 {
		// Opening a FIFO or a terminal must neither block nor take it.
		how.Flags |= unix.O_NONBLOCK | unix.O_NOCTTY
	}
	if flag&unix.O_CREAT != 0 || flag&unix.O_TMPFILE == unix.O_TMPFILE {
		how.Mode = uint64(perm.Perm())
	}
	var fd int
	for {
		fd, err = unix.Openat2(parent, rel, &how)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%w: a symbolic link on the way (%w)", ErrNotPlain, err)
	case err != nil:
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	want := uint32(unix.S_IFREG)
	if flag&unix.O_DIRECTORY != 0 {
		want = unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT != want {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: file type %#o", ErrNotPlain, st.Mode&unix.S_IFMT)
	}
	if flag&unix.O_PATH == 0 && flag&unix.O_NONBLOCK == 0 {
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return os.NewFile(uintptr(fd), path), nil
}
