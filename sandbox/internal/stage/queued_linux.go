package stage

import (
	"os"

	"golang.org/x/sys/unix"
)

// queuedBytes says how many bytes wait to be read in pipe (FIONREAD,
// which x/sys names TIOCINQ, its value on Linux); 0 if it cannot tell.
func queuedBytes(pipe *os.File) int64 {
	rc, err := pipe.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil {
		return 0
	}
	return int64(n)
}
