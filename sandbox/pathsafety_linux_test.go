package sandbox_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test checks what a root runner allows the sandbox uid: run it as root")
	}
}

// TestSetupErrorIsRecorded: the sandbox's init failing to build the
// agent's root (here: the baton binary under a 0700 directory the
// sandbox uid cannot search) ends the run with an error naming the phase
// and the cause, recorded in state.ndjson; it does not crash.
func TestSetupErrorIsRecorded(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	needRoot(t)
	priv := filepath.Join(t.TempDir(), "priv")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	// The spec's baton binary is the agent: bound into the sandbox.
	baton := filepath.Join(priv, "baton")
	copyFile(t, runnerBinary(t), baton, 0o755)
	spec := newSpec(t, baton, "netprobe")
	spec.Baton = baton
	dir := start(t, spec, "")
	_, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	wantSentinel(t, s, 1, journal.ReasonError, "")
	for _, want := range []string{"sandbox setup (host-sources)", baton, "permission denied", "--state-dir"} {
		if !strings.Contains(s.Detail, want) {
			t.Errorf("sentinel detail %q does not say %q", s.Detail, want)
		}
	}
	state := readFile(t, dir.State())
	if !strings.Contains(state, `"stage":"inner-child","phase":"host-sources","status":"error"`) {
		t.Errorf("state.ndjson has no host-sources error record:\n%s", state)
	}
	if b, _ := os.ReadFile(dir.Stderr()); strings.Contains(string(b), "panic") {
		t.Errorf("stderr.log holds a panic:\n%s", b)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelSignalsOnlyTheRunner: a runner.pid naming another live
// process, or a link, makes Cancel refuse and signal nothing, while the
// run's runner holds its lock; the runner's own pid cancels the run.
func TestCancelSignalsOnlyTheRunner(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, sh("echo started; sleep "+m)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	real, err := os.ReadFile(dir.PID())
	if err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	died := make(chan error, 1)
	go func() { died <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-died })
	plant := func(write func(path string) error) {
		t.Helper()
		tmp := dir.PID() + ".plant"
		if err := write(tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir.PID()); err != nil {
			t.Fatal(err)
		}
	}
	plant(func(p string) error { return os.WriteFile(p, fmt.Appendf(nil, "%d\n", victim.Process.Pid), 0o644) })
	if err := sandbox.Cancel(dir); !errors.Is(err, sandbox.ErrNotRunner) {
		t.Errorf("Cancel with a planted pid = %v, want ErrNotRunner", err)
	}
	other := filepath.Join(t.TempDir(), "pid")
	if err := os.WriteFile(other, real, 0o644); err != nil {
		t.Fatal(err)
	}
	plant(func(p string) error { return os.Symlink(other, p) })
	if err := sandbox.Cancel(dir); !errors.Is(err, journal.ErrNotPlain) {
		t.Errorf("Cancel with runner.pid a link = %v, want ErrNotPlain", err)
	}
	select {
	case err := <-died:
		t.Fatalf("the planted pid's process was signalled: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if alive, err := sandbox.Alive(dir); err != nil || !alive {
		t.Fatalf("Alive = %v, %v: the run should still be going", alive, err)
	}
	plant(func(p string) error { return os.WriteFile(p, real, 0o644) })
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatalf("Cancel with the runner's pid: %v", err)
	}
	_, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
	waitPIDs(t, 0, "sleep", m)
}

// TestOnlyTheWorkspaceIsTheAgents: of a root runner's run directory,
// the sandbox uid (the agent's uid on the host) owns and can write the
// workspace alone. Even from outside the sandbox's mount namespace, as
// an agent that escaped it would be, it can neither read, replace nor
// add a file of the run directory. (That the agent writes its workspace
// from inside the sandbox, and sees nothing else of the run directory,
// is TestSandboxHidesRunDirectories.)
func TestOnlyTheWorkspaceIsTheAgents(t *testing.T) {
	t.Parallel()
	needRoot(t)
	m := marker(t)
	spec := newSpec(t, sh("echo started; sleep "+m)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	uid, gid := sandbox.DefaultSandboxUID, sandbox.DefaultSandboxGID
	// Searchable up to the runs directory, as a worker's state dir is.
	for p := filepath.Dir(string(dir)); p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(string(dir))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || st.Uid != 0 {
		t.Errorf("run directory mode %v owner %d, want 0700 root", fi.Mode().Perm(), st.Uid)
	}
	entries, err := os.ReadDir(string(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(string(dir), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if e.Name() == journal.AgentName {
			// The agent directory, and in it the workspace and home.
			for _, p := range []string{dir.Agent(), dir.Workspace(), dir.Home()} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || int(st.Uid) != uid || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: mode %v owner %d, want a 0700 directory of uid %d", p, fi.Mode(), st.Uid, uid)
				}
			}
			if ents, err := os.ReadDir(dir.Agent()); err != nil || len(ents) != 2 {
				t.Errorf("the agent directory holds %v (%v), want its workspace and home alone", ents, err)
			}
			continue
		}
		if e.Name() == journal.InputSocketName {
			// The worker's way to the runner: root's alone.
			if fi.Mode().Type() != os.ModeSocket || st.Uid != 0 || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v owner %d, want a 0600 socket of root", e.Name(), fi.Mode(), st.Uid)
			}
			continue
		}
		if !fi.Mode().IsRegular() || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: mode %v owner %d, want a regular file of root nobody else may write", e.Name(), fi.Mode(), st.Uid)
		}
	}
	// The sandbox uid on the host, outside every namespace.
	script := fmt.Sprintf(`
d=%[1]s
cd "$(dirname "$d")" && echo "reach=runs"
for f in %[2]s; do
	cat "$d/$f" >/dev/null 2>&1 && echo "read=$f"
	echo x >> "$d/$f" 2>/dev/null && echo "wrote=$f"
done
touch "$d/new" 2>/dev/null && echo "created=new"
ln -s /etc/shadow "$d/stderr2.log" 2>/dev/null && echo "created=link"
mv "$d/workspace" "$d/ws2" 2>/dev/null && echo "moved=workspace"
echo done
`, dir, strings.Join([]string{journal.JournalName, journal.StderrName, journal.StateName, journal.SpecName,
		journal.LockName, journal.PIDName, journal.InputName, journal.FinishedName}, " "))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe as uid %d: %v\n%s", uid, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "reach=runs\ndone" {
		t.Errorf("as uid %d, outside the sandbox, the run directory let it:\n%s", uid, got)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	waitEnd(t, dir, spec.Nonce, 10*time.Second)
}
