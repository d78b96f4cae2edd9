package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxPID is the kernel's largest pid_max.
const maxPID = 1 << 22

// parsePID reads a pid file's content: one positive decimal pid.
func parsePID(b []byte) (int, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" || len(s) > 8 {
		return 0, fmt.Errorf("pid file %q is not a pid", b)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("pid file %q is not a pid", b)
		}
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 || pid > maxPID {
		return 0, fmt.Errorf("pid file %q is not a pid", b)
	}
	return pid, nil
}

// writePIDFile replaces path with pid atomically, so a reader never sees
// half a pid.
func writePIDFile(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
