package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// heldRun makes a run directory whose lock this process holds, as
// runner-outer does, and returns it with the lock's inode.
func heldRun(t *testing.T) (journal.Dir, uint64) {
	t.Helper()
	dir := journal.Dir(t.TempDir())
	f, err := chain.LockRun(filepath.Join(string(dir), journal.LockName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return dir, st.Ino
}

// TestHoldsLockUnderChurn: while many other flocks come and go, a
// listing of /proc/locks read a page at a time skips entries; holdsLock
// must still find the lock's holder every time, never ErrNotRunning.
func TestHoldsLockUnderChurn(t *testing.T) {
	dir, ino := heldRun(t)
	others := make([]*os.File, 1500)
	for i := range others {
		f, err := os.Create(filepath.Join(t.TempDir(), strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := chain.Flock(f, unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		others[i] = f
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := 0; ctx.Err() == nil; i++ {
			f := others[i%len(others)]
			_ = chain.Flock(f, unix.LOCK_UN)
			_ = chain.Flock(f, unix.LOCK_EX)
		}
	}()
	defer func() { stop(); <-churned }()
	pid := os.Getpid()
	var missed atomic.Int64
	deadline := time.Now().Add(3 * time.Second)
	checks := 0
	for ; time.Now().Before(deadline); checks++ {
		holders, err := lockHolders(ino)
		if err != nil {
			t.Fatal(err)
		}
		if len(holders) == 0 {
			missed.Add(1)
		}
		if err := holdsLock(dir, pid); err != nil {
			t.Fatalf("check %d: holdsLock = %v while this process holds the lock", checks, err)
		}
	}
	t.Logf("%d checks; a single read of /proc/locks missed the holder %d times", checks, missed.Load())
}

// TestHoldsLockListing: what holdsLock concludes from each kind of
// listing, with the lock held by this process or by nobody.
func TestHoldsLockListing(t *testing.T) {
	pid := os.Getpid()
	entry := func(pid int, ino uint64) string {
		return fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d 00:2c:%d 0 EOF\n", pid, ino)
	}
	for _, tc := range []struct {
		name    string
		held    bool
		listing func(read int, ino uint64) string
		want    error // nil: pid holds it
		reads   int
	}{
		{"listed at once", true, func(_ int, ino uint64) string { return entry(pid, ino) }, nil, 1},
		{"missed twice, then listed", true, func(read int, ino uint64) string {
			if read < 3 {
				return ""
			}
			return entry(pid, ino)
		}, nil, 3},
		{"held but never listed", true, func(int, uint64) string { return "" }, ErrTryAgain, holderReads},
		{"held by another pid", true, func(_ int, ino uint64) string { return entry(pid+1, ino) }, ErrNotRunner, holderReads},
		{"free, nothing listed", false, func(int, uint64) string { return "" }, ErrNotRunning, 1},
		{"free, a stale entry of another pid", false, func(_ int, ino uint64) string { return entry(pid+1, ino) }, ErrNotRunning, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir journal.Dir
			var ino uint64
			if tc.held {
				dir, ino = heldRun(t)
			} else {
				dir = journal.Dir(t.TempDir())
				f, err := os.Create(filepath.Join(string(dir), journal.LockName))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			reads := 0
			orig := procLocks
			procLocks = func() (io.ReadCloser, error) {
				reads++
				return io.NopCloser(strings.NewReader(tc.listing(reads, ino))), nil
			}
			t.Cleanup(func() { procLocks = orig })
			err := holdsLock(dir, pid)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("holdsLock = %v, want %v", err, tc.want)
			}
			if reads != tc.reads {
				t.Errorf("read /proc/locks %d times, want %d", reads, tc.reads)
			}
		})
	}
}
