package stage

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInnerFilesLeaveNothingOpen: when a descriptor runner-inner needs
// cannot be made (here the file table is full a few pipes in), the ones
// already made are closed, whichever step failed.
func TestInnerFilesLeaveNothingOpen(t *testing.T) {
	open := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	failed, made := 0, false
	for room := 0; room <= 20 && !made; room++ {
		before := open()
		// The descriptor ReadDir itself takes is closed again: the table
		// holds before-1 once it returns.
		tight := lim
		tight.Cur = uint64(before - 1 + room)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &tight); err != nil {
			t.Fatal(err)
		}
		f, err := openInnerFiles([]byte(`{}`))
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			f.closeChild()
			f.closeOurs()
		}
		if after := open(); after != before {
			t.Fatalf("room for %d descriptors: %d open before, %d after (%v)", room, before, after, err)
		}
		if err != nil {
			failed++
		}
		made = err == nil
	}
	// Every step that makes one failed once (five pipes, the spec, the
	// socket pair), and then the whole set was made.
	if failed < 7 || !made {
		t.Fatalf("%d tries failed, made %v: the file table was not what ran out", failed, made)
	}
}
