package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// TestDiskLimit: an agent that writes past limits.disk in its workspace,
// in many files, gets ENOSPC and its run fails naming the disk limit; its
// /tmp is bounded by limits.tmp; a run beside it on the same node writes
// and ends normally; the workspace stays readable after the run until
// ReleaseWorkspace, and the image holds no more than the limit on disk.
func TestDiskLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk bound is a filesystem per run, which only a root worker mounts: run as root")
	}
	const disk = 32 << 20
	// Four 12 MiB files: no one file is over the limit, together they are.
	hog := newSpec(t, sh(`set -e
i=0; while [ $i -lt 4 ]; do dd if=/dev/zero of=f$i bs=1M count=12 2>>err; i=$((i+1)); done
echo unreachable`)...)
	hog.Limits.Disk = disk
	// /tmp is a tmpfs of limits.tmp bytes.
	tmp := newSpec(t, sh(`dd if=/dev/zero of=/tmp/big bs=1M count=4 2>/dev/null || echo tmp-full`)...)
	tmp.Limits.Disk = disk
	tmp.Limits.Tmp = 2 << 20
	// A neighbour writes within its own limit all along.
	ok := newSpec(t, sh(`for i in 1 2 3 4 5 6 7 8; do dd if=/dev/zero of=g$i bs=1M count=2 2>/dev/null || exit 9; sleep 0.1; done; echo fine`)...)
	ok.Limits.Disk = disk
	ok.Deadline = time.Now().Add(60 * time.Second)
	hog.Deadline, tmp.Deadline = ok.Deadline, ok.Deadline

	okDir := start(t, ok, "")
	hogDir := start(t, hog, "")
	tmpDir := start(t, tmp, "")

	stdout, s := waitEnd(t, hogDir, hog.Nonce, 50*time.Second)
	wantSentinel(t, s, 1, journal.ReasonExit, "")
	if stdout != "" || !strings.Contains(s.Detail, sandbox.DiskFullDetail) {
		t.Fatalf("hog: stdout %q, detail %q; want no output and the disk limit named", stdout, s.Detail)
	}
	errLog, err := os.ReadFile(filepath.Join(hogDir.Workspace(), "err"))
	if err != nil || !strings.Contains(string(errLog), "No space left on device") {
		t.Fatalf("the hog's workspace (readable after the run) has err = %q, %v; want ENOSPC", errLog, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(hogDir.Workspace(), &fs); err != nil || fs.Blocks*uint64(fs.Bsize) > disk {
		t.Fatalf("the hog's workspace holds %d bytes (%v), limit %d", fs.Blocks*uint64(fs.Bsize), err, disk)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(string(hogDir), "workspace.img"), &st); err != nil || st.Blocks*512 > disk+disk/8 {
		t.Fatalf("the image uses %d bytes on the host (%v), limit %d", st.Blocks*512, err, disk)
	}

	stdout, s = waitEnd(t, tmpDir, tmp.Nonce, 50*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "tmp-full\n" {
		t.Fatalf("tmp: stdout %q, want the write to /tmp refused", stdout)
	}

	stdout, s = waitEnd(t, okDir, ok.Nonce, 50*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "fine\n" || s.Detail != "" {
		t.Fatalf("neighbour: stdout %q, detail %q", stdout, s.Detail)
	}

	// Released, the workspace is an empty directory again and the run
	// directory can go.
	if err := sandbox.ReleaseWorkspace(hogDir); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.ReleaseWorkspace(hogDir); err != nil {
		t.Fatalf("a second ReleaseWorkspace: %v", err)
	}
	if ents, err := os.ReadDir(hogDir.Workspace()); err != nil || len(ents) != 0 {
		t.Fatalf("released workspace has %d entries (%v)", len(ents), err)
	}
	if err := os.RemoveAll(string(hogDir)); err != nil {
		t.Fatal(err)
	}
}
