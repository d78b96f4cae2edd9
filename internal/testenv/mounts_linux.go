package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ReleaseMountsUnder unmounts, when the test ends, every mount under dir:
// the workspaces a root worker mounts for its runs' disk bound (see
// sandbox.ReleaseWorkspace), so the directory can be removed and no loop
// device is left behind. Register it after the directory is made, so it
// runs before its removal.
func ReleaseMountsUnder(t testing.TB, dir string) {
	t.Cleanup(func() {
		for _, m := range mountsUnder(dir) {
			if err := unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				t.Logf("unmount %s: %v", m, err)
			}
		}
	})
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	dir = filepath.Clean(dir) + "/"
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		// Field 5 is the mount point, with spaces and the like as \ooo.
		if p := unescapeMountinfo(fields[4]); strings.HasPrefix(p, dir) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
