package chain

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// lockWait is how long runner-outer retries the run's lock: long enough
// to ride out a sandbox.Alive probe, which holds it for an instant.
const lockWait = time.Second

// LockRun takes the run's exclusive flock for the runner's life. The lock
// file is opened close-on-exec, so no process the runner starts holds it.
func LockRun(path string) (*os.File, error) {
	f, err := journal.OpenNoLinks(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := Flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, errors.New("another runner holds the run's lock")
			}
			return nil, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Flock applies flock(2)'s how to f, retried while interrupted.
func Flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
