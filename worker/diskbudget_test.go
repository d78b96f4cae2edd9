package worker_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// needRoot fails a test of bounded workspaces (images, loop devices),
// which only a root worker makes, when not run as root: it says what is
// missing rather than passing without testing.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("bounded workspaces (images, loop devices) are a root worker's: run as root")
	}
}

// mountsUnder counts the mounts of the host's table under dir.
func mountsUnder(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			n++
		}
	}
	return n
}

// loopsUnder counts the loop devices backed by a named file under dir
// (the image pool's unnamed images, "(deleted)", are not a run's).
func loopsUnder(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if s := strings.TrimSpace(string(b)); err == nil && strings.HasPrefix(s, dir+"/") && !strings.HasSuffix(s, "(deleted)") {
			n++
		}
	}
	return n
}

// bwrapStart times a sandbox start as the finding did: a bwrap of true
// with every namespace, which copies the host's mount table.
func bwrapStart(t *testing.T) time.Duration {
	t.Helper()
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return 0
	}
	var best time.Duration
	for range 5 {
		start := time.Now()
		if out, err := exec.Command(bw, "--unshare-all", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
			t.Logf("bwrap: %v: %s", err, out)
			return 0
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return best
}

// TestFinishedRunsGiveBackMounts is issue 23 item 6: after 200 finished
// runs the node's mount table and loop devices are as before them, where
// each run once kept its workspace mounted, a loop device behind it,
// until pruned (and a sandbox start slowed with every mount).
func TestFinishedRunsGiveBackMounts(t *testing.T) {
	needRoot(t)
	const runs = 200
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.Profiles["sh"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: time.Minute,
			Limits: config.Limits{Disk: 16 << 20}}
	}))
	mounts, loops, before := mountsUnder(t, h.stateDir), loopsUnder(t, h.stateDir), bwrapStart(t)
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = newRunID(t)
		h.submit(map[string]any{"runId": ids[i], "profile": "sh", "args": []string{"echo hi > f; echo ok"}})
	}
	for _, id := range ids {
		if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
			t.Fatalf("run %s: %+v", id, st)
		}
	}
	// Given back once the terminal status is out: wait for the last one's,
	// images included (the worker unmounts, which frees the loop device,
	// then removes the image: the counts can be back before it is gone).
	imagesLeft := func() int {
		n := 0
		for _, id := range ids {
			if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", id, "workspace.img")); !os.IsNotExist(err) {
				n++
			}
		}
		return n
	}
	testenv.WaitFor(t, 10*time.Second, "the finished runs' mounts, loop devices and images given back", func() bool {
		return mountsUnder(t, h.stateDir) == mounts && loopsUnder(t, h.stateDir) == loops && imagesLeft() == 0
	})
	for _, id := range ids {
		if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", id, "workspace.img")); !os.IsNotExist(err) {
			t.Fatalf("run %s kept its workspace image: %v", id, err)
		}
	}
	t.Logf("bwrap start before %d runs %v, after %v; %d mounts and %d loop devices under the state dir after, as before",
		runs, before, bwrapStart(t), mounts, loops)
}

// TestWorkerGivesBackLeftWorkspaces: a worker that starts gives back the
// workspace a killed predecessor left mounted for a finished run.
func TestWorkerGivesBackLeftWorkspaces(t *testing.T) {
	needRoot(t)
	h := newHarness(t)
	h.stops[h.w.ID()]()
	dir := filepath.Join(h.stateDir, "runs", "left-behind")
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "workspace.img")
	for _, argv := range [][]string{
		{"truncate", "-s", "16M", img},
		{"mkfs.ext4", "-q", "-F", "-O", "^has_journal", img},
		{"mount", "-o", "loop", img, filepath.Join(dir, "workspace")},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "finished"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if mountsUnder(t, h.stateDir) != 1 || loopsUnder(t, h.stateDir) != 1 {
		t.Fatalf("set-up: %d mounts, %d loop devices", mountsUnder(t, h.stateDir), loopsUnder(t, h.stateDir))
	}
	h.addWorker("w2")
	testenv.WaitFor(t, 10*time.Second, "the left workspace unmounted, its loop device and image gone", func() bool {
		_, err := os.Lstat(img)
		return mountsUnder(t, h.stateDir) == 0 && loopsUnder(t, h.stateDir) == 0 && os.IsNotExist(err)
	})
}

// smallStateDir mounts a tmpfs of size bytes for the test: a small node's
// state filesystem.
func smallStateDir(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(testenv.StateDir(t), "small")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0711", size)); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// onSmallDisk moves h's worker onto a small state filesystem, with the
// test's logger and metrics.
func (h *harness) onSmallDisk(size int64, log *testenv.Buffer, reg *prometheus.Registry) {
	h.t.Helper()
	h.stops[h.w.ID()]()
	h.stateDir = smallStateDir(h.t, size)
	h.w, _ = h.addWorker("small", worker.WithLogger(zerolog.New(log)), worker.WithMetrics(reg))
	h.t.Cleanup(func() {
		if h.t.Failed() {
			h.t.Logf("worker log:\n%s", log.String())
		}
	})
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// hogScript stays within limits {disk: 32MiB, output: 2MiB} and writes
// all of them: its workspace to the full (ENOSPC ends the write), 2 MB on
// stdout, and 64 MiB on stderr.
const hogScript = `head -c 40000000 /dev/zero > fill 2>/dev/null
head -c 67108864 /dev/zero >&2
head -c 2000000 /dev/zero | tr '\0' a | fold -w 999
echo hog done`

// TestRunsWithinLimitsDoNotFillTheNode is F10's reproduction, scaled to a
// 256 MiB state filesystem: runs within their limits (disk 32 MiB, output
// 2 MiB) that write all of them once took ~66 MiB each of the node
// (journal, image, stderr up to RLIMIT_FSIZE = limits.disk), for the run
// retention: a few filled it, and the runs after them failed, another
// tenant's too. Now each finished run keeps its journal and 1 MiB of
// stderr, and no more start at once than the disk holds: all of them, and
// the other tenant's run after them, succeed.
func TestRunsWithinLimitsDoNotFillTheNode(t *testing.T) {
	const hogTimeout = 2 * time.Minute
	needRoot(t)
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.DiskReserve = 16 << 20
		c.Profiles["hog"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: hogTimeout,
			Limits: config.Limits{Disk: 32 << 20, Output: 2 << 20}}
		c.Profiles["tenant"] = config.Profile{Command: []string{"{baton}", "fake-agent"}, AllowArgs: config.AnyArgs, Timeout: time.Minute,
			Limits: config.Limits{Disk: 16 << 20, Output: 1 << 20}}
	}))
	var log testenv.Buffer
	h.onSmallDisk(256<<20, &log, prometheus.NewRegistry())
	var hogs []string
	for range 5 {
		id := newRunID(t)
		hogs = append(hogs, id)
		h.submit(map[string]any{"runId": id, "profile": "hog", "args": []string{hogScript}})
	}
	for _, id := range hogs {
		// The hogs end by their own timeout at the latest; beside two soaks
		// in a fresh-clone CI their 2 MiB of lines each took over a minute
		// to publish (batch attempts timing out on a loaded server), and a
		// 60 s wait gave up on a run that succeeded.
		st := h.terminalWithin(id, hogTimeout+time.Minute)
		if st.Status != protocol.StatusSucceeded || !strings.HasSuffix(st.StderrTail, "\x00") {
			t.Fatalf("hog %s: %s, reason %q, stderr tail %q\nworker log:\n%s", id, st.Status, st.Reason, st.StderrTail[max(0, len(st.StderrTail)-200):], log.String())
		}
	}
	other := newRunID(t)
	h.submit(map[string]any{"runId": other, "profile": "tenant", "args": []string{"--lines", "20"}})
	if st := h.terminal(other); st.Status != protocol.StatusSucceeded {
		t.Fatalf("the other tenant's run: %+v\nworker log:\n%s", st, log.String())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(h.stateDir, &fs); err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d hogs and another run: %d MiB of 256 free", len(hogs), int64(fs.Bavail)*fs.Bsize>>20)
}

// TestDiskBudgetHoldsRunBack: a run whose limits the state filesystem
// cannot hold beside a running run's stays in the stream, with the reason
// in the worker's log and its metric, and starts once the running one
// has ended (and given its workspace back).
func TestDiskBudgetHoldsRunBack(t *testing.T) {
	needRoot(t)
	var reserve int64 = 16 << 20
	h := newHarness(t, withConfig(func(c *config.Config) {
		c.DiskReserve = config.ByteSize(reserve)
		c.Profiles["big"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: time.Minute,
			Limits: config.Limits{Disk: 1 << 30, Output: 1 << 20}}
	}))
	var log testenv.Buffer
	reg := prometheus.NewRegistry()
	h.onSmallDisk(256<<20, &log, reg)
	// A disk limit that fits once beside the reserve, never twice.
	var fs unix.Statfs_t
	if err := unix.Statfs(h.stateDir, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	limits := map[string]string{"disk": fmt.Sprintf("%dMiB", (free-reserve)*6/10>>20)}
	first, second := newRunID(t), newRunID(t)
	h.submit(map[string]any{"runId": first, "profile": "big", "limits": limits,
		"args": []string{"while [ ! -e go ]; do sleep 0.1; done 2>/dev/null; echo first"}})
	h.waitStatus(first, protocol.StatusStarted)
	h.submit(map[string]any{"runId": second, "profile": "big", "limits": limits, "args": []string{"echo second"}})
	testenv.WaitFor(t, 10*time.Second, "the second run held back, with the reason logged", func() bool {
		return counter(t, reg, "baton_jobs_held_for_disk_total") >= 1 && strings.Contains(log.String(), "disk budget: job left in the stream")
	})
	if !strings.Contains(log.String(), "no room on the state filesystem for another run") || !strings.Contains(log.String(), second) {
		t.Fatalf("the log does not say why %s waits:\n%s", second, log.String())
	}
	if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", second)); !os.IsNotExist(err) {
		t.Fatalf("the held run was started: %v", err)
	}
	if err := os.WriteFile(filepath.Join(journal.Dir(filepath.Join(h.stateDir, "runs", first)).Workspace(), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first, second} {
		if st := h.terminal(id); st.Status != protocol.StatusSucceeded {
			t.Fatalf("run %s: %+v\nworker log:\n%s", id, st, log.String())
		}
	}
}
