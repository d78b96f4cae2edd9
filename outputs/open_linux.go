package outputs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// errNotRegular: the name no longer is a regular file (swapped for a link,
// a FIFO or a directory since it was listed).
var errNotRegular = errors.New("not a regular file")

// Every open of the walk is relative to its parent's descriptor, one
// syscall per step, and never follows a link: the agent may swap any name
// for a link at any time.
const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
)

// openAt opens name of the directory dirfd with flags, making it readable
// again (mode) when the agent took its permissions away and we own it
// (root reads it anyway). The chmod never follows a link either.
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

// openDirAt opens the directory name of dirfd.
func openDirAt(dirfd int, name string) (*os.File, error) {
	fd, err := openAt(dirfd, name, dirFlags, 0o700)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFileAt opens the regular file name of dirfd for reading without
// following a link and without blocking on a FIFO swapped in, and checks
// what it opened.
func openFileAt(dirfd int, name string) (*os.File, os.FileInfo, error) {
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
		return nil, nil, fmt.Errorf("%s: %w", EscapePath(name), errNotRegular)
	}
	return f, st, nil
}

// openBeneath opens the regular file rel (slash separated, at most
// maxPathBytes) of the directory rootfd: its parent in one syscall that
// the kernel keeps beneath rootfd without following any link, then the
// file itself as openFileAt does.
func openBeneath(rootfd int, rel string) (*os.File, os.FileInfo, error) {
	dir, base := path.Split(rel)
	if dir == "" {
		return openFileAt(rootfd, base)
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
		return nil, nil, &fs.PathError{Op: "open", Path: EscapePath(dir), Err: err}
	}
	defer unix.Close(fd)
	return openFileAt(fd, base)
}

// lstatAt is the lstat of name of dirfd.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
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

// readlinkAt reads the target of the link name of dirfd (at most
// PATH_MAX bytes, as the kernel keeps them).
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// fileMode is the fs.FileMode type bits of a stat's mode.
func fileMode(st *unix.Stat_t) fs.FileMode {
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
