package fsat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// ErrNotRegular: the name no longer is a regular file (swapped for a link,
// a FIFO or a directory since it was listed).
var ErrNotRegular = errors.New("not a regular file")

const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
)

// openAt opens name of the directory dirfd with flags, making it readable
// again (mode) when its owner took its permissions away and we own it.
// The chmod never follows a link either.
func openAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EACCES && unix.Fchmodat(dirfd, name, mode, unix.AT_SYMLINK_NOFOLLOW) == nil {
			fd, err = unix.Openat(dirfd, name, flags, 0)
		}
		return fd, err
	}
}

// OpenDir opens the directory name of dirfd (unix.AT_FDCWD: of the
// working directory).
func OpenDir(dirfd int, name string) (*os.File, error) {
	fd, err := openAt(dirfd, name, dirFlags, 0o700)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// OpenFile opens the regular file name of dirfd for reading without
// following a link and without blocking on a FIFO swapped in, and checks
// what it opened; quote shows the name in the error that says it is not
// a regular file.
func OpenFile(dirfd int, name string, quote func(string) string) (*os.File, os.FileInfo, error) {
	fd, err := openAt(dirfd, name, fileFlags, 0o600)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", quote(name), ErrNotRegular)
	}
	return f, st, nil
}

// OpenBeneath opens the regular file rel (slash separated) of the
// directory rootfd: its parent in one syscall that the kernel keeps
// beneath rootfd without following any link, then the file itself as
// OpenFile does.
func OpenBeneath(rootfd int, rel string, quote func(string) string) (*os.File, os.FileInfo, error) {
	dir, base := path.Split(rel)
	if dir == "" {
		return OpenFile(rootfd, base, quote)
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(rootfd, dir, &unix.OpenHow{
			Flags:   uint64(dirFlags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: quote(dir), Err: err}
	}
	defer unix.Close(fd)
	return OpenFile(fd, base, quote)
}

// Lstat is the lstat of name of dirfd.
func Lstat(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return st, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return st, nil
	}
}

// Readlink reads the target of the link name of dirfd (at most PATH_MAX
// bytes, as the kernel keeps them).
func Readlink(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// FileMode is the fs.FileMode of a stat's mode: its permission and type
// bits.
func FileMode(st *unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}
