package chain

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/batonhq/baton/journal"
)

// maxPID is the kernel's largest pid_max.
const maxPID = 1 << 22

// ParsePID reads a pid file's content: one positive decimal pid.
func ParsePID(b []byte) (int, error) {
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

// WritePIDFile replaces path with pid atomically, so a reader never sees
// half a pid; nothing is written through a link.
func WritePIDFile(path string, pid int) error {
	tmp := path + ".tmp"
	f, err := journal.OpenNoLinks(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(pid) + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
