package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// flockHolders parses /proc/locks and returns the pids holding a FLOCK on
// a file of inode ino. The inode alone, not the device: /proc/locks names
// the superblock's device, which stat reports differently on btrfs and
// overlayfs. Cancel needs no more: it signals a pid only if that very
// process holds such a lock, and no victim does. Lines of waiters ("->"),
// other lock kinds, and holders without a pid (-1, 0) are skipped.
func flockHolders(r io.Reader, ino uint64) ([]int, error) {
	want := ":" + strconv.FormatUint(ino, 10)
	var pids []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || !strings.HasSuffix(f[5], want) || strings.Count(f[5], ":") != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil {
			return nil, fmt.Errorf("/proc/locks: bad pid in %q", sc.Text())
		}
		if pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err()
}
