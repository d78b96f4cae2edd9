package stage

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// boundedWorkspace opens the run's workspace (O_PATH) if it is a
// filesystem of its own, a bounded one; nil if not. The runner opens it
// before dropping its privileges, which cost it the way to the workspace.
func boundedWorkspace(dir journal.Dir) *os.File {
	f, err := os.OpenFile(dir.Workspace(), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var st, parent unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Lstat(string(dir), &parent) != nil || st.Dev == parent.Dev {
		f.Close()
		return nil
	}
	return f
}

// full reports whether the filesystem of f has no room left, in blocks or
// in inodes.
func full(f *os.File) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &fs) != nil {
		return false
	}
	return fs.Bavail*uint64(fs.Bsize) < diskFullSlack || fs.Ffree == 0
}

// diskFullSlack: a workspace with less room than this is full; a write
// that failed with ENOSPC leaves less than one block of its size behind.
const diskFullSlack = 1 << 20
