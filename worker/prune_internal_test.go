package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
)

// pruneFixture lays out a state dir of runs in every situation Prune meets.
func pruneFixture(t *testing.T, now time.Time) (stateDir string, lock *os.File) {
	t.Helper()
	stateDir = t.TempDir()
	if err := os.Chmod(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(stateDir, "runs")
	mk := func(id string, finishedAgo time.Duration, journalBytes int) journal.Dir {
		d := journal.Dir(filepath.Join(runs, id))
		if err := os.MkdirAll(d.Workspace(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.Journal(), make([]byte, journalBytes), 0o600); err != nil {
			t.Fatal(err)
		}
		if finishedAgo >= 0 {
			if err := os.WriteFile(d.Finished(), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			at := now.Add(-finishedAgo)
			if err := os.Chtimes(d.Finished(), at, at); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	mk("old", 48*time.Hour, 1000)
	mk("recent", time.Hour, 10)
	unfinished := mk("unfinished", -1, 10)
	old := time.Now().Add(-30 * 24 * time.Hour)
	_ = os.Chtimes(unfinished.Journal(), old, old)
	// Finished long ago, but a runner still holds its lock.
	held := mk("held", 48*time.Hour, 10)
	lock, err := os.OpenFile(held.Lock(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// Finished long ago, and the agent left a tree its owner cannot walk,
	// and a link out of the run directory.
	hostile := mk("hostile", 72*time.Hour, 10)
	deep := filepath.Join(hostile.Workspace(), "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stateDir, filepath.Join(hostile.Workspace(), "out")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{deep, filepath.Dir(deep)} {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Not runs: a file, and a directory whose name is no runId.
	if err := os.WriteFile(filepath.Join(runs, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(runs, "not.a.run"), 0o755); err != nil {
		t.Fatal(err)
	}
	return stateDir, lock
}

func TestPrune(t *testing.T) {
	now := time.Now()
	stateDir, lock := pruneFixture(t, now)
	ctx := context.Background()
	clock := func(o *pruneOptions) { o.now = func() time.Time { return now } }
	ids := func(ps []Pruned) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.RunID)
		}
		slices.Sort(out)
		return out
	}
	left := func() []string {
		es, _ := os.ReadDir(filepath.Join(stateDir, "runs"))
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	all := left()

	dry, err := Prune(ctx, stateDir, 24*time.Hour, clock, PruneDryRun())
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(dry); !slices.Equal(got, []string{"hostile", "old"}) {
		t.Fatalf("dry run would prune %v, want [hostile old]", got)
	}
	if !slices.Equal(left(), all) {
		t.Fatalf("dry run removed something: %v left of %v", left(), all)
	}
	var st unix.Stat_t
	if err := unix.Stat(journal.Dir(filepath.Join(stateDir, "runs", "old")).Journal(), &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range dry {
		if p.RunID == "old" && (p.Bytes != st.Blocks*512 || p.Age < 47*time.Hour) {
			t.Fatalf("old: %+v, want %d bytes (its journal's blocks), 48h old", p, st.Blocks*512)
		}
	}

	skipOld := pruneSkip(func(id string) bool { return id == "old" })
	got, err := Prune(ctx, stateDir, 24*time.Hour, clock, skipOld)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{"hostile"}) {
		t.Fatalf("pruned %v, want [hostile]", ids(got))
	}
	got, err = Prune(ctx, stateDir, 24*time.Hour, clock)
	if err != nil || !slices.Equal(ids(got), []string{"old"}) {
		t.Fatalf("pruned %v, %v; want [old]", ids(got), err)
	}
	want := []string{"held", "not.a.run", "recent", "stray", "unfinished"}
	if !slices.Equal(left(), want) {
		t.Fatalf("left %v, want %v", left(), want)
	}
	// The link out of the hostile run was not followed.
	if !isMode(t, stateDir, 0o755) {
		t.Fatal("pruning changed the mode of the state dir, through the agent's link")
	}

	// The runner let go of its lock: now it goes too; recent stays until
	// it is old enough.
	lock.Close()
	got, err = Prune(ctx, stateDir, 24*time.Hour, clock)
	if err != nil || !slices.Equal(ids(got), []string{"held"}) {
		t.Fatalf("pruned %v, %v; want [held]", ids(got), err)
	}
	got, err = Prune(ctx, stateDir, time.Minute, clock)
	if err != nil || !slices.Equal(ids(got), []string{"recent"}) {
		t.Fatalf("pruned %v, %v; want [recent]", ids(got), err)
	}
	if !slices.Equal(left(), []string{"not.a.run", "stray", "unfinished"}) {
		t.Fatalf("left %v", left())
	}
}

func isMode(t *testing.T, path string, mode os.FileMode) bool {
	t.Helper()
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().Perm() == mode
}

func TestPruneErrors(t *testing.T) {
	if _, err := Prune(context.Background(), t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Fatalf("zero age: %v", err)
	}
	if _, err := Prune(context.Background(), filepath.Join(t.TempDir(), "none"), time.Hour); err == nil {
		t.Fatal("missing state dir: no error")
	}
}

// TestOpenUpFollowsNoLink: making an agent's tree removable touches real
// directories under the run only, never what a link points at.
func TestOpenUpFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(root, "x", "y")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "x", "link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{inner, filepath.Dir(inner)} {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	openUp(root)
	if !isMode(t, outside, 0o755) {
		t.Fatal("openUp changed the mode of a directory outside the tree, through a link")
	}
	if !isMode(t, filepath.Dir(inner), 0o700) || !isMode(t, inner, 0o700) {
		t.Fatal("openUp left a directory unopened")
	}
}

// TestRemoveTreeUnprivileged: a worker that is not root removes the tree
// an agent left with directories of mode 0 (as root, which ignores modes,
// the removal runs as an unprivileged uid that owns the tree).
func TestRemoveTreeUnprivileged(t *testing.T) {
	if dir := os.Getenv("BATON_TEST_REMOVE_TREE"); dir != "" {
		if err := removeTree(dir); err != nil {
			t.Fatal(err)
		}
		return
	}
	base := testenv.StateDir(t)
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "run")
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	for d := deep; d != root; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		if err := removeTree(root); err != nil {
			t.Fatal(err)
		}
	} else {
		const uid = 65534
		if err := filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) }); err != nil {
			t.Fatal(err)
		}
		// The test binary's own directory is root's alone.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(base, "worker.test")
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run", "^TestRemoveTreeUnprivileged$")
		cmd.Env = append(os.Environ(), "BATON_TEST_REMOVE_TREE="+root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if out, err := testenv.Output(cmd); err != nil {
			t.Fatalf("removeTree as uid %d: %v\n%s", uid, err, out)
		}
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatalf("tree still there: %v", err)
	}
}

func TestPruneBinaries(t *testing.T) {
	dir := testenv.StateDir(t)
	old := time.Now().Add(-5 * time.Hour)
	mk := func(name string, stale bool, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o755); err != nil {
			t.Fatal(err)
		}
		if stale {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	fresh := mk("baton-0123456789abcdef", false, nil)
	stale := mk("baton-runner-fedcba9876543210", true, nil)
	other := mk("notes.txt", true, nil)
	odd := mk("baton-runner-xyz", true, nil)
	// A runner of an earlier deploy still runs this copy.
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	busy := mk("baton-aaaaaaaaaaaaaaaa", true, sleep)
	testenv.Start(t, exec.Command(busy, "30"))

	removed, err := pruneBinaries(dir, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{stale}) {
		t.Fatalf("removed %v, want [%s]", removed, stale)
	}
	for _, p := range []string{fresh, other, odd, busy} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if got, err := pruneBinaries(filepath.Join(dir, "none"), time.Now()); err != nil || got != nil {
		t.Fatalf("no bin dir: %v, %v", got, err)
	}
}

func TestInstalledName(t *testing.T) {
	for name, want := range map[string]bool{
		"baton-0123456789abcdef": true, "baton-runner-0123456789abcdef": true,
		"baton-0123456789ABCDEF": false, "baton-0123456789abcde": false, "baton-runner-": false,
		"baton": false, "baton-runner": false, ".lock": false, "baton-0123456789abcdef0": false,
		".baton-123": false,
	} {
		if got := installedName(name); got != want {
			t.Errorf("installedName(%q) = %v", name, got)
		}
	}
}

// TestInstallBinaryClaims: installing a binary whose copy exists marks the
// copy as claimed, so a prune of the node's other worker keeps it.
func TestInstallBinaryClaims(t *testing.T) {
	src := filepath.Join(t.TempDir(), "baton")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bin")
	dst, err := installBinary(src, dir, "baton")
	if err != nil || !installedName(filepath.Base(dst)) {
		t.Fatalf("install: %s, %v", dst, err)
	}
	old := time.Now().Add(-5 * time.Hour)
	if err := os.Chtimes(dst, old, old); err != nil {
		t.Fatal(err)
	}
	again, err := installBinary(src, dir, "baton")
	if err != nil || again != dst {
		t.Fatalf("install again: %s, %v", again, err)
	}
	if removed, err := pruneBinaries(dir, time.Now().Add(-time.Hour)); err != nil || len(removed) != 0 {
		t.Fatalf("pruned a claimed copy: %v, %v", removed, err)
	}
}

// TestPrunerOnItsClock: the pruner passes at a tenth of the retention (an
// hour at most) on its own clock, and judges a run's age by it: a test moves the clock
// where it slept for the retention to pass.
func TestPrunerOnItsClock(t *testing.T) {
	now := time.Now()
	stateDir, _ := pruneFixture(t, now)
	m := clock.NewManual(now)
	pruned := prometheus.NewCounter(prometheus.CounterOpts{Name: "pruned"})
	p := &pruner{stateDir: stateDir, retention: 24 * time.Hour, active: func(string) bool { return false },
		pruned: pruned, log: zerolog.Nop(), clock: m}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	left := func() []string {
		ents, err := os.ReadDir(filepath.Join(stateDir, "runs"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	pass := func(d time.Duration) {
		t.Helper()
		if !m.Sleeping(ctx, 1) {
			t.Fatal("the pruner never slept on its clock")
		}
		m.Advance(d)
		if !m.Sleeping(ctx, 1) { // the pass is over once it sleeps again
			t.Fatal("the pruner did not sleep again after its pass")
		}
	}
	pass(p.every() - time.Second)
	all := []string{"held", "hostile", "not.a.run", "old", "recent", "stray", "unfinished"}
	if got := left(); !slices.Equal(got, all) {
		t.Fatalf("before its period the pruner left %v, want %v", got, all)
	}
	pass(time.Second) // an hour in: "old" and "hostile" go, "recent" (1 h + 1 h) stays
	if got := left(); !slices.Equal(got, []string{"held", "not.a.run", "recent", "stray", "unfinished"}) {
		t.Fatalf("after a pass the runs left are %v", got)
	}
	pass(23 * time.Hour) // "recent" is now past the retention
	if got := left(); !slices.Equal(got, []string{"held", "not.a.run", "stray", "unfinished"}) {
		t.Fatalf("a day later the runs left are %v", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(pruned)
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 3 {
		t.Fatalf("runs counted pruned: %v (%v), want 3", mfs, err)
	}
}
