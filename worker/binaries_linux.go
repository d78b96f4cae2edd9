package worker

import (
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

type fileKey struct{ dev, ino uint64 }

func fileID(fi os.FileInfo) fileKey {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileKey{uint64(st.Dev), st.Ino}
	}
	return fileKey{}
}

// executables is the set of files the host's processes execute, as far
// as this process may see (root sees all).
func executables() map[fileKey]bool {
	out := map[fileKey]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if fi, err := os.Stat(filepath.Join("/proc", p.Name(), "exe")); err == nil {
			out[fileID(fi)] = true
		}
	}
	return out
}

// lockDir takes the exclusive flock of dir's .lock file, which the node's
// workers share, and returns how to release it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
