package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/testenv"
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

	// Released, the agent directory (workspace and home) is an empty
	// directory again and the run directory can go.
	if err := sandbox.ReleaseWorkspace(hogDir); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.ReleaseWorkspace(hogDir); err != nil {
		t.Fatalf("a second ReleaseWorkspace: %v", err)
	}
	if ents, err := os.ReadDir(hogDir.Agent()); err != nil || len(ents) != 0 {
		t.Fatalf("released agent directory has %d entries (%v)", len(ents), err)
	}
	if err := os.RemoveAll(string(hogDir)); err != nil {
		t.Fatal(err)
	}
}

// loopBackings lists the backing files of the loop devices whose backing
// file is under dir ("<dir>/#<inode> (deleted)" for an unnamed one).
func loopBackings(dir string) []string {
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, p := range devs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // detached meanwhile
		}
		if f := strings.TrimSpace(string(b)); strings.HasPrefix(f, dir+"/") {
			out = append(out, f)
		}
	}
	return out
}

// pooledBackings are those of loopBackings(runs) that are unnamed files
// of runs itself: images a pool holds.
func pooledBackings(runs string) []string {
	var out []string
	for _, b := range loopBackings(runs) {
		if strings.HasPrefix(b, runs+"/#") {
			out = append(out, b)
		}
	}
	return out
}

// TestWorkspacePool: after two bounded runs started from one runs
// directory, the starting process makes images of their size ahead,
// unnamed files of that directory (O_TMPFILE) it holds open; the next run
// of that size gets one (linked in as its workspace.img, and no longer
// held, so no other run can have it), and its workspace is as a fresh
// one: empty, 0700, bounded.
func TestWorkspacePool(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk bound is a filesystem per run, which only a root worker mounts: run as root")
	}
	const disk = 48 << 20
	first := newSpec(t, sh("echo first > f")...)
	first.Limits.Disk = disk
	runs := filepath.Dir(first.RunDir)
	waitEnd(t, start(t, first, ""), first.Nonce, 20*time.Second)
	again := newSpec(t, sh("echo again > f")...)
	again.Limits.Disk = disk
	again.RunDir = filepath.Join(runs, again.RunID)
	waitEnd(t, start(t, again, ""), again.Nonce, 20*time.Second)

	// The pool's images: this process's descriptors of unnamed files in
	// the runs directory ("<runs>/#<inode> (deleted)"), by inode.
	images := func() map[uint64]bool {
		fds, _ := os.ReadDir("/proc/self/fd")
		m := map[uint64]bool{}
		for _, e := range fds {
			p := filepath.Join("/proc/self/fd", e.Name())
			link, err := os.Readlink(p)
			if err != nil || !strings.HasPrefix(link, runs+"/#") {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil {
				m[st.Ino] = true
			}
		}
		return m
	}
	// Full (8 images, each mounted ahead, detached: on a loop device
	// already), the filler has stopped: the pool holds still. Making an
	// image and attaching it are two steps, so the wait is for both.
	deadline := time.Now().Add(20 * time.Second)
	for len(images()) < 8 || len(pooledBackings(runs)) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after two bounded runs started: %d images ready, %d on loop devices (mounted ahead), want 8 of each: %q",
				len(images()), len(pooledBackings(runs)), pooledBackings(runs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := images()

	second := newSpec(t, sh("ls -A; stat -c '%a' .; echo second > g; df -k . | tail -1")...)
	second.Limits.Disk = disk
	second.RunDir = filepath.Join(runs, second.RunID)
	dir := start(t, second, "")
	stdout, s := waitEnd(t, dir, second.Nonce, 20*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(string(dir), "workspace.img"), &st); err != nil {
		t.Fatal(err)
	}
	if !before[st.Ino] {
		t.Fatalf("the run's image (inode %d) is not one of the pool's %v", st.Ino, before)
	}
	if images()[st.Ino] {
		t.Errorf("the pool still holds the image it gave (inode %d)", st.Ino)
	}
	// The pooled mount was moved onto the workspace: the workspace is a
	// filesystem of its own, on the loop device the pool had attached.
	var ws, rd syscall.Stat_t
	if err := syscall.Stat(dir.Workspace(), &ws); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(string(dir), &rd); err != nil {
		t.Fatal(err)
	}
	if ws.Dev == rd.Dev {
		t.Fatalf("the workspace of %s is not mounted", dir)
	}
	// (Its backing file's name is the one it had in the pool, unnamed.)
	loop, err := os.Open(fmt.Sprintf("/dev/loop%d", unix.Minor(ws.Dev)))
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	info, err := unix.IoctlLoopGetStatus64(int(loop.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Inode != st.Ino {
		t.Errorf("the workspace's loop device is backed by inode %d, want its workspace.img's %d", info.Inode, st.Ino)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || lines[0] != "700" {
		t.Fatalf("the pooled workspace listed %q: want it empty and 0700", stdout)
	}
	// df's second field: the filesystem's size in KiB.
	if f := strings.Fields(lines[1]); len(f) < 2 {
		t.Errorf("df printed %q", lines[1])
	} else if kib, err := strconv.Atoi(f[1]); err != nil || kib == 0 || kib > disk>>10 {
		t.Errorf("the pooled workspace's size %q is not within %d KiB", lines[1], disk>>10)
	}
}

// fillPoolEnv makes this test binary (TestMain) fill a workspace pool in
// the runs directory it names, and exit with it full.
const fillPoolEnv = "BATON_TEST_FILL_POOL"

// poolDisk is the size of fillPool's images.
const poolDisk = 40 << 20

// fillPool starts two bounded runs in runs (the second makes the pool),
// waits until 8 images are mounted ahead, and returns the exit code. The
// runs' agents sleep on, so their runners (spawned by this process) would
// keep whatever of the pool they inherited.
func fillPool(runs string) int {
	runner := os.Getenv(fillPoolEnv + "_RUNNER")
	for i := range 2 {
		id := fmt.Sprintf("fill-%d", i)
		spec := sandbox.Spec{RunID: id, RunDir: filepath.Join(runs, id), Argv: []string{"/bin/sleep", "60"},
			Env: []string{"PATH=/usr/bin:/bin"}, Nonce: "0123456789abcdef0123456789abcdef",
			Deadline: time.Now().Add(30 * time.Second), KillGrace: time.Second}
		spec.Limits.Disk = poolDisk
		if _, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(runner)); err != nil {
			fmt.Fprintln(os.Stderr, "fill pool:", err)
			return 1
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := len(pooledBackings(runs))
		if n >= 8 {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "fill pool: %d images mounted ahead after 20 s, want 8\n", n)
			return 1
		}
	}
}

// TestWorkspacePoolLeavesNothing: a worker's pool of workspace images,
// mounted ahead, is gone when the worker ends, however it ends: no loop
// device, mount or file stays behind for an image no run took, not even
// through the runners it spawned, which outlive it.
func TestWorkspacePoolLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk bound is a filesystem per run, which only a root worker mounts: run as root")
	}
	needSandbox(t)
	root := t.TempDir()
	testenv.ReleaseMountsUnder(t, root)
	runs := filepath.Join(root, "runs")
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		dir := journal.Dir(filepath.Join(runs, fmt.Sprintf("fill-%d", i)))
		t.Cleanup(func() { killRunner(dir) })
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fillPoolEnv+"="+runs, fillPoolEnv+"_RUNNER="+runnerBinary(t))
	if out, err := testenv.Output(cmd); err != nil {
		t.Fatalf("the pool's process: %v\n%s", err, out)
	}
	// Its two runs are still mounted (their workspaces outlive the
	// worker); nothing else of it may be.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := pooledBackings(runs)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the pool's process exited, loop devices still back its images: %q", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var under []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], runs+"/") {
			under = append(under, f[4])
		}
	}
	if len(under) != 2 {
		t.Errorf("mounts under the runs directory: %q, want the two runs' workspaces", under)
	}
	ents, err := os.ReadDir(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Errorf("the runs directory holds %d entries, want the two runs'", len(ents))
	}
}
