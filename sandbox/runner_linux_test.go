package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// runnerBuild is a runner binary built once per test binary.
type runnerBuild struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

var (
	defaultRunner runnerBuild
	// kernelRunner's wait stage leaves reaping to the kernel on 6.15 and
	// later (stage.initReap=kernel).
	kernelRunner runnerBuild
	// stayingRunner's runner-outer never re-execs (stage.outerReexec).
	stayingRunner runnerBuild
)

func TestMain(m *testing.M) {
	if f := os.Getenv(spawnHeldEnv); f != "" {
		os.Exit(spawnHeld(f))
	}
	if runs := os.Getenv(fillPoolEnv); runs != "" {
		os.Exit(fillPool(runs))
	}
	code := m.Run()
	for _, b := range []*runnerBuild{&defaultRunner, &kernelRunner, &stayingRunner} {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
	os.Exit(code)
}

// runnerBinary builds sandbox/internal/runnertest once per test binary:
// the runner chain's stages as subcommands, as in the baton binary.
func runnerBinary(t testing.TB) string { return defaultRunner.get(t) }

// kernelRunnerBinary is runnerBinary whose wait stage leaves reaping to
// the kernel where it can.
func kernelRunnerBinary(t testing.TB) string {
	return kernelRunner.get(t, "-ldflags=-X github.com/batonhq/baton/sandbox/internal/stage.initReap=kernel")
}

// stayingRunnerBinary is runnerBinary whose runner-outer supervises
// in-process, as when its exec fails.
func stayingRunnerBinary(t testing.TB) string {
	return stayingRunner.get(t, "-ldflags=-X github.com/batonhq/baton/sandbox/internal/stage.outerReexec=off")
}

func (b *runnerBuild) get(t testing.TB, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "baton-runnertest-")
		if err != nil {
			b.err = err
			return
		}
		// World-searchable: a root runner's sandbox execs it as nobody.
		if b.err = os.Chmod(dir, 0o755); b.err != nil {
			return
		}
		b.path = filepath.Join(dir, "runnertest")
		args := append(append([]string{"build", "-o", b.path}, flags...), "./internal/runnertest")
		cmd := exec.Command("go", args...)
		// Static, as README's install line builds baton-runner.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = testenv.Build(cmd)
	})
	if b.err != nil {
		t.Fatalf("build the runner binary: %v\n%s", b.err, b.out)
	}
	return b.path
}

var (
	usernsOnce sync.Once
	usernsErr  error
)

// needSandbox fails the test when this host cannot create the sandbox's
// namespaces, saying what to enable.
func needSandbox(t testing.TB) {
	t.Helper()
	usernsOnce.Do(func() {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}
		_, usernsErr = testenv.Output(cmd)
	})
	if usernsErr != nil {
		t.Fatalf("these tests need user namespaces (run as root, or enable unprivileged ones: "+
			"sysctl -w user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1 "+
			"kernel.apparmor_restrict_unprivileged_userns=0): %v", usernsErr)
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newSpec is a spec for argv in a fresh run directory under a test
// directory, with a random nonce and a deadline far enough away.
func newSpec(t testing.TB, argv ...string) sandbox.Spec {
	t.Helper()
	runnerBinary(t) // built before any deadline is set
	id := "run-" + randomHex(t, 4)
	root := t.TempDir()
	testenv.ReleaseMountsUnder(t, root)
	return sandbox.Spec{
		RunID:     id,
		RunDir:    filepath.Join(root, "runs", id),
		Argv:      argv,
		Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Nonce:     randomHex(t, 16),
		Deadline:  time.Now().Add(30 * time.Second),
		KillGrace: 2 * time.Second,
	}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// start runs spec through sandbox.Start with the test runner binary, and
// makes sure no runner outlives the test.
func start(t testing.TB, spec sandbox.Spec, input string) journal.Dir {
	t.Helper()
	return startWith(t, runnerBinary(t), spec, input)
}

// startWith is start with the runner binary bin.
func startWith(t testing.TB, bin string, spec sandbox.Spec, input string) journal.Dir {
	t.Helper()
	needSandbox(t)
	r, err := sandbox.Start(context.Background(), spec, []byte(input), sandbox.WithBinary(bin))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r.PID <= 0 {
		t.Fatalf("Start returned pid %d", r.PID)
	}
	dir := journal.Dir(spec.RunDir)
	t.Cleanup(func() { killRunner(dir) })
	return dir
}

// killRunner SIGKILLs a runner still holding dir; its chain follows it.
func killRunner(dir journal.Dir) {
	if alive, _ := sandbox.Alive(dir); !alive {
		return
	}
	if b, err := os.ReadFile(dir.PID()); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitEnd waits until no runner holds dir, then splits the journal into
// the agent's stdout and the sentinel, checking the sentinel is the last
// line, carries the run's nonce, and is encoded exactly as the journal
// package encodes it.
func waitEnd(t testing.TB, dir journal.Dir, nonce string, timeout time.Duration) (string, journal.Sentinel) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		alive, err := sandbox.Alive(dir)
		if err != nil {
			t.Fatalf("Alive: %v", err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still alive after %v; state:\n%s", timeout, readFile(t, dir.State()))
		}
		time.Sleep(2 * time.Millisecond)
	}
	b, err := os.ReadFile(dir.Journal())
	if err != nil {
		t.Fatalf("read journal: %v; state:\n%s", err, readFile(t, dir.State()))
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("journal does not end with a newline: %q", b)
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	var s journal.Sentinel
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("last journal line %q is not a sentinel: %v", b[i:], err)
	}
	if s.Nonce != nonce {
		t.Fatalf("sentinel nonce %q, want the run's %q", s.Nonce, nonce)
	}
	if !bytes.Equal(s.Line(), b[i:]) {
		t.Fatalf("sentinel line %q is not encoded as journal.Sentinel.Line %q", b[i:], s.Line())
	}
	if parsed, ok := journal.ParseSentinel(b[i:len(b)-1], nonce); !ok || parsed != s {
		t.Fatalf("journal.ParseSentinel does not recognise the sentinel %q (%v, %+v)", b[i:], ok, parsed)
	}
	return string(b[:i]), s
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

func wantSentinel(t testing.TB, got journal.Sentinel, exit int, reason, signal string) {
	t.Helper()
	if got.Exit != exit || got.Reason != reason || got.Signal != signal {
		t.Fatalf("sentinel = exit %d reason %q signal %q (detail %q), want exit %d reason %q signal %q",
			got.Exit, got.Reason, got.Signal, got.Detail, exit, reason, signal)
	}
}

// waitJournal waits until the journal holds want.
func waitJournal(t testing.TB, dir journal.Dir, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readFile(t, dir.Journal()), want) {
		if time.Now().After(deadline) {
			t.Fatalf("journal never held %q: %q\nstate:\n%s", want, readFile(t, dir.Journal()), readFile(t, dir.State()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRunJournalsStdoutThenSentinel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script string
		input  string
		stdout string
		exit   int
		reason string
		signal string
	}{
		{"exit 0", `echo '{"type":"hello"}'; echo plain text`, "", "{\"type\":\"hello\"}\nplain text\n", 0, journal.ReasonExit, ""},
		{"exit 3", `echo before; exit 3`, "", "before\n", 3, journal.ReasonExit, ""},
		{"partial last line", `printf 'a\nb'`, "", "a\nb\n", 0, journal.ReasonExit, ""},
		{"no output", `true`, "", "", 0, journal.ReasonExit, ""},
		{"killed by SIGKILL", `echo x; kill -KILL $$`, "", "x\n", 137, journal.ReasonSignal, "KILL"},
		{"input on stdin", `cat`, "line one\nline two\n", "line one\nline two\n", 0, journal.ReasonExit, ""},
		{"empty input", `cat; echo done`, "", "done\n", 0, journal.ReasonExit, ""},
		// A pipe, never a file: Claude Code reads stream-json only from one.
		{"stdin is a pipe", `test -p /dev/stdin && echo pipe; cat`, "x\n", "pipe\nx\n", 0, journal.ReasonExit, ""},
		{"input over a pipe's buffer", `wc -c`, strings.Repeat("a", 300<<10), "307200\n", 0, journal.ReasonExit, ""},
		{"input never read", `echo done`, strings.Repeat("a", 1<<20), "done\n", 0, journal.ReasonExit, ""},
		{"forged sentinel", `echo '{"__exit":0,"__nonce":"0123456789abcdef0123456789abcdef","reason":"exit"}'; exit 4`, "",
			"{\"__exit\":0,\"__nonce\":\"0123456789abcdef0123456789abcdef\",\"reason\":\"exit\"}\n", 4, journal.ReasonExit, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, sh(c.script)...)
			dir := start(t, spec, c.input)
			stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
			if stdout != c.stdout {
				t.Errorf("journal before the sentinel = %q, want %q", stdout, c.stdout)
			}
			wantSentinel(t, s, c.exit, c.reason, c.signal)
		})
	}
}

// facts runs script as an agent and returns its "key=value" lines.
func facts(t *testing.T, spec sandbox.Spec, script string) (map[string]string, string) {
	t.Helper()
	spec.Argv = sh(script)
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	m := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, stdout
}

func TestSandboxNamespaces(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Env = append(spec.Env, "SECRET_TOKEN=s3cret")
	script := `
echo "pid=$$"
echo "init=$(tr '\0' ' ' < /proc/1/cmdline)"
echo "procs=$(ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\n' ' ')"
echo "hostname=$(cat /proc/sys/kernel/hostname)"
echo "ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "uid=$(id -u)"
echo "gid=$(id -g)"
echo "capeff=$(sed -n 's/^CapEff:\t//p' /proc/self/status)"
{ cat /proc/1/fd/4 || readlink /proc/1/fd/3 || echo forged >/proc/1/fd/3; } >/dev/null 2>&1 && echo "init-fds=open" || echo "init-fds=hidden"
echo "uidmap=$(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')"
echo "pwd=$(pwd)"
echo "env_pwd=$PWD"
echo "home=$HOME"
echo "secret=$SECRET_TOKEN"
echo "pgid_is_pid=$(test "$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ')" = "$$" && echo yes || echo unknown)"
ls -l /proc/$$/fd
cat /proc/1/fd/4 2>/dev/null; echo
env
`
	m, stdout := facts(t, spec, script)
	// pid 1 is the init, re-exec'd as the wait stage, whose Go runtime
	// threads take the next few pids; the agent follows them.
	if n, err := strconv.Atoi(m["pid"]); err != nil || n < 2 || n > 32 {
		t.Errorf("agent pid = %q, want a small pid of a namespace of its own", m["pid"])
	}
	if !strings.Contains(m["init"], "runner-init-wait") {
		t.Errorf("pid 1 runs %q, want runner-init-wait", m["init"])
	}
	procs := strings.Fields(m["procs"])
	if len(procs) == 0 || procs[0] != "1" || len(procs) > 8 {
		t.Errorf("/proc lists %q, want init and a few processes of the namespace", m["procs"])
	}
	for _, p := range procs {
		if n, _ := strconv.Atoi(p); n > 64 || n == os.Getpid() {
			t.Errorf("/proc lists pid %d: the agent sees processes outside its namespace (%q)", n, m["procs"])
		}
	}
	if m["hostname"] != "baton" {
		t.Errorf("hostname = %q, want baton", m["hostname"])
	}
	if m["ifaces"] != "lo" {
		t.Errorf("interfaces = %q, want only lo", m["ifaces"])
	}
	if want := strconv.Itoa(sandbox.DefaultAgentUID); m["uid"] != want || m["gid"] != strconv.Itoa(sandbox.DefaultAgentGID) {
		t.Errorf("uid/gid inside = %q/%q, want %d/%d", m["uid"], m["gid"], sandbox.DefaultAgentUID, sandbox.DefaultAgentGID)
	}
	// The agent's own user namespace maps it to the sandbox's 0.
	if want := fmt.Sprintf("%d 0 1", sandbox.DefaultAgentUID); m["uidmap"] != want {
		t.Errorf("uid_map = %q, want %q", m["uidmap"], want)
	}
	if m["capeff"] != "0000000000000000" {
		t.Errorf("a process of the agent has capabilities %q", m["capeff"])
	}
	if m["init-fds"] != "hidden" {
		t.Errorf("the agent can reach its init's descriptors (status pipe, spec)")
	}
	// The same places in every run, whatever its directory on the host.
	if m["pwd"] != "/workspace" || m["env_pwd"] != "/workspace" || m["home"] != "/home/agent" {
		t.Errorf("pwd %q, $PWD %q, $HOME %q: want /workspace and /home/agent", m["pwd"], m["env_pwd"], m["home"])
	}
	if m["secret"] != "s3cret" {
		t.Errorf("the spec's environment did not reach the agent: SECRET_TOKEN=%q", m["secret"])
	}
	// The agent holds its stdio and nothing else.
	fds := 0
	for _, line := range strings.Split(stdout, "\n") {
		link, target, ok := strings.Cut(line, " -> ")
		if !ok || !strings.HasPrefix(line, "l") {
			continue
		}
		fds++
		num := link[strings.LastIndexByte(link, ' ')+1:]
		if num != "0" && num != "1" && num != "2" {
			t.Errorf("agent holds fd %s -> %s", num, target)
		}
		for _, bad := range []string{"journal.ndjson", "runner.lock", "spec.json", "state.ndjson", "memfd"} {
			if strings.Contains(target, bad) {
				t.Errorf("agent holds fd %s -> %s", num, target)
			}
		}
	}
	if fds != 3 {
		t.Errorf("the agent holds %d descriptors, want its stdio: %q", fds, stdout)
	}
	if strings.Contains(stdout, spec.Nonce) {
		t.Errorf("the nonce is visible in the sandbox:\n%s", stdout)
	}
}

func TestSandboxHidesRunDirectories(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	dir := journal.Dir(spec.RunDir)
	// Another run's files next to this one.
	other := filepath.Join(filepath.Dir(spec.RunDir), "other-run")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "journal.ndjson"), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
echo "runs=$(ls -A %[1]s | tr '\n' ' ')"
echo "rundir=$(ls -A %[2]s | tr '\n' ' ')"
cat %[3]s >/dev/null 2>&1 && echo "journal=readable" || echo "journal=hidden"
cat %[4]s >/dev/null 2>&1 && echo "spec=readable" || echo "spec=hidden"
cat %[5]s >/dev/null 2>&1 && echo "other=readable" || echo "other=hidden"
echo x > /workspace/mine && echo "workspace=writable"
d=/workspace
while [ "$d" != / ]; do
	umount "$d" 2>/dev/null && echo "umounted=$d"
	umount -l "$d" 2>/dev/null && echo "umounted=$d"
	d=$(dirname "$d")
done
cat %[3]s >/dev/null 2>&1 && echo "journal-after-umount=readable" || echo "journal-after-umount=hidden"
`, filepath.Dir(spec.RunDir), spec.RunDir, dir.Journal(), dir.Spec(), filepath.Join(other, "journal.ndjson"))
	m, _ := facts(t, spec, script)
	want := map[string]string{
		// No path of the host's runs directory is in the sandbox.
		"runs":      "",
		"rundir":    "",
		"journal":   "hidden",
		"spec":      "hidden",
		"other":     "hidden",
		"workspace": "writable",
		"umounted":  "",
		// The agent has no capability over the sandbox's mounts.
		"journal-after-umount": "hidden",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if got := readFile(t, filepath.Join(dir.Workspace(), "mine")); got != "x\n" {
		t.Errorf("the agent's file in the workspace = %q, want it on the host", got)
	}
}

func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, runnerBinary(t), "netprobe")
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	var ifaces []string
	for _, line := range strings.Split(stdout, "\n") {
		if f, ok := strings.CutPrefix(line, "iface "); ok {
			ifaces = append(ifaces, f)
		}
	}
	if len(ifaces) != 1 || !strings.HasPrefix(ifaces[0], "lo ") || !strings.Contains(ifaces[0], "up") {
		t.Errorf("interfaces = %q, want only lo, up", ifaces)
	}
	if !strings.Contains(stdout, "loopback-tcp pong\n") {
		t.Errorf("no TCP round trip over loopback: %q", stdout)
	}
}

func TestStderrGoesToSidecar(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`echo out; echo err >&2; printf 'partial' >&2`)...)
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "out\n" {
		t.Errorf("journal = %q, want only stdout", stdout)
	}
	if got := readFile(t, dir.Stderr()); got != "err\npartial" {
		t.Errorf("stderr.log = %q, want the agent's stderr", got)
	}
}

func TestSeedFiles(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Files = map[string]string{"a.txt": "hello ", "dir/sub/b.txt": "world"}
	m, _ := facts(t, spec, `echo "content=$(cat a.txt dir/sub/b.txt)"; echo "owner=$(stat -c %u dir/sub/b.txt)"`)
	if m["content"] != "hello world" {
		t.Errorf("seed files read %q", m["content"])
	}
	if m["owner"] != strconv.Itoa(sandbox.DefaultAgentUID) {
		t.Errorf("seed file owner inside = %q, want the agent's %d", m["owner"], sandbox.DefaultAgentUID)
	}
	if os.Geteuid() == 0 {
		st, err := os.Stat(filepath.Join(journal.Dir(spec.RunDir).Workspace(), "dir/sub/b.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != sandbox.DefaultSandboxUID {
			t.Errorf("seed file owner on the host = %d, want %d", uid, sandbox.DefaultSandboxUID)
		}
	}
}

// starters are the ways a run starts: cold (Start), and on a chain
// started ahead (Prestart, then Take).
var starters = []struct {
	name  string
	start func(t testing.TB, spec sandbox.Spec, input string) journal.Dir
}{
	{"cold", start},
	{"prestarted", func(t testing.TB, spec sandbox.Spec, input string) journal.Dir {
		return take(t, prestart(t, runnerBinary(t), spec, randomHex(t, 4)), spec, input)
	}},
}

func TestMissingAgentIsAnError(t *testing.T) {
	t.Parallel()
	for _, st := range starters {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, "no-such-agent-binary", "--flag")
			dir := st.start(t, spec, "")
			stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
			if stdout != "" {
				t.Errorf("journal = %q, want nothing but the sentinel", stdout)
			}
			wantSentinel(t, s, 127, journal.ReasonError, "")
			if !strings.Contains(s.Detail, `"no-such-agent-binary"`) || !strings.Contains(s.Detail, "not found") {
				t.Errorf("sentinel detail %q does not say the agent was not found", s.Detail)
			}
			if got := readFile(t, dir.Stderr()); !strings.Contains(got, s.Detail) {
				t.Errorf("stderr.log = %q, want the detail %q for a person to read", got, s.Detail)
			}
		})
	}
}

// hostPIDs lists the host pids whose argv is exactly argv.
func hostPIDs(t testing.TB, argv ...string) []int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitPIDs waits until exactly n host processes run argv.
func waitPIDs(t testing.TB, n int, argv ...string) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := hostPIDs(t, argv...)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes run %q, want %d", len(pids), argv, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// marker is a sleep argument unique to one test, to find its processes.
func marker(t testing.TB) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return strconv.Itoa(900000 + int(b[0])<<10 + int(b[1])<<2 + int(b[2])%4)
}

// deadlineRoom is how long after its start a deadline test's run ends: room
// for its agent to start, and its children be seen, before it. A fresh-clone
// CI once saw no child within 5 s, with the worker and test packages' race
// binaries beside this one on 2 cores.
const deadlineRoom = 10 * time.Second

// waitChildren is waitPIDs(t, n, argv...) for a run with a deadline: when the
// run ends before n processes are seen, it fails at once with the run's end,
// which tells a start slower than deadlineRoom from children that never ran.
func waitChildren(t testing.TB, dir journal.Dir, n int, argv ...string) {
	t.Helper()
	deadline := time.Now().Add(deadlineRoom + 5*time.Second)
	for {
		pids := hostPIDs(t, argv...)
		if len(pids) == n {
			return
		}
		if alive, err := sandbox.Alive(dir); err == nil && !alive {
			t.Fatalf("the run ended with %d processes run %q seen, want %d first (a start slower than %v?); journal:\n%s",
				len(pids), argv, n, deadlineRoom, readFile(t, dir.Journal()))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes run %q, want %d; state:\n%s", len(pids), argv, n, readFile(t, dir.State()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeadlineStopsAgentAndChildren(t *testing.T) {
	t.Parallel()
	for _, st := range starters {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			m := marker(t)
			spec := newSpec(t, sh(fmt.Sprintf("echo started; sleep %s & sleep %s", m, m))...)
			// Room for a start on a loaded machine (see
			// TestDeadlineEscalatesToKill; a cold start under the race
			// detector beside the other packages once took over 2 s). A
			// prestarted chain is built with it, and past it by the take:
			// the run's counts.
			spec.Deadline = time.Now().Add(deadlineRoom)
			dir := st.start(t, spec, "")
			waitChildren(t, dir, 2, "sleep", m)
			stdout, s := waitEnd(t, dir, spec.Nonce, deadlineRoom+10*time.Second)
			if stdout != "started\n" {
				t.Errorf("journal = %q", stdout)
			}
			wantSentinel(t, s, 143, journal.ReasonTimeout, "TERM")
			waitPIDs(t, 0, "sleep", m)
		})
	}
}

func TestDeadlineEscalatesToKill(t *testing.T) {
	t.Parallel()
	m := marker(t)
	// The agent and its child ignore SIGTERM.
	spec := newSpec(t, sh(fmt.Sprintf("trap '' TERM; sleep %s & sleep %s", m, m))...)
	// Room for a start on a loaded machine (a root run makes its
	// workspace's filesystem first), so the sleeps are seen before the
	// deadline.
	spec.Deadline = time.Now().Add(deadlineRoom)
	spec.KillGrace = 300 * time.Millisecond
	dir := start(t, spec, "")
	waitChildren(t, dir, 2, "sleep", m)
	_, s := waitEnd(t, dir, spec.Nonce, deadlineRoom+10*time.Second)
	wantSentinel(t, s, 137, journal.ReasonTimeout, "KILL")
	if !strings.Contains(s.Detail, "grace") {
		t.Errorf("detail %q does not mention the grace period", s.Detail)
	}
	// From the deadline, not from the agent's start, which a slow setup
	// may push past the deadline.
	if d := time.Since(spec.Deadline); d < spec.KillGrace {
		t.Errorf("the run ended %v after its deadline: before the grace of %v", d, spec.KillGrace)
	}
	waitPIDs(t, 0, "sleep", m)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	for _, st := range starters {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			testCancel(t, st.start)
		})
	}
}

func testCancel(t *testing.T, start func(t testing.TB, spec sandbox.Spec, input string) journal.Dir) {
	m := marker(t)
	spec := newSpec(t, sh("echo started; sleep "+m)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	if alive, err := sandbox.Alive(dir); err != nil || !alive {
		t.Fatalf("Alive = %v, %v while the agent runs", alive, err)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "started\n" {
		t.Errorf("journal = %q", stdout)
	}
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
	if alive, err := sandbox.Alive(dir); err != nil || alive {
		t.Errorf("Alive = %v, %v after the run ended", alive, err)
	}
	if err := sandbox.Cancel(dir); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("Cancel of an ended run = %v, want ErrNotRunning", err)
	}
	waitPIDs(t, 0, "sleep", m)
}

func TestAliveAndCancelWithoutRun(t *testing.T) {
	t.Parallel()
	dir := journal.Dir(filepath.Join(t.TempDir(), "never-started"))
	if alive, err := sandbox.Alive(dir); err != nil || alive {
		t.Errorf("Alive of a run that never started = %v, %v", alive, err)
	}
	if err := sandbox.Cancel(dir); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("Cancel of a run that never started = %v, want ErrNotRunning", err)
	}
}

func TestSignalToRunnerStopsAgent(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done`)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, dir.PID())))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "started\ngot TERM\n" {
		t.Errorf("journal = %q, want the agent to have handled SIGTERM", stdout)
	}
	// The agent exited 0 by itself, but a signal to the runner ended the run.
	wantSentinel(t, s, 0, journal.ReasonSignal, "TERM")
}

func TestAgentRunsAsSandboxUID(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, "sleep", m)
	dir := start(t, spec, "")
	pids := waitPIDs(t, 1, "sleep", m)
	status := readFile(t, fmt.Sprintf("/proc/%d/status", pids[0]))
	want := os.Geteuid()
	if want == 0 {
		want = sandbox.DefaultSandboxUID
	}
	wantLine := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", want, want, want, want)
	if !strings.Contains(status, wantLine+"\n") {
		t.Errorf("agent's host status lacks %q:\n%s", wantLine, status)
	}
	// A root runner drops its groups; an unprivileged one cannot (a user
	// namespace denies setgroups), so its agent keeps the runner's own.
	wantGroups := ""
	if os.Geteuid() != 0 {
		gs, _ := os.Getgroups()
		for _, g := range gs {
			wantGroups += strconv.Itoa(g) + " "
		}
	}
	for _, line := range strings.Split(status, "\n") {
		if groups, ok := strings.CutPrefix(line, "Groups:"); ok && strings.TrimSpace(groups) != strings.TrimSpace(wantGroups) {
			t.Errorf("the agent has supplementary groups %q on the host, want %q", groups, wantGroups)
		}
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	_, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
}

// runHelper starts `runnertest start` for spec as a separate process and
// returns it once it printed the runner's pid.
func runHelper(t *testing.T, spec sandbox.Spec, input string, cred *syscall.Credential, tmp string) *testenv.Proc {
	t.Helper()
	specPath := filepath.Join(tmp, spec.RunID+".spec.json")
	inputPath := filepath.Join(tmp, spec.RunID+".input")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inputPath, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(runnerBinary(t), "start", specPath, inputPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out := &bounded.Buffer{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	t.Cleanup(func() { killRunner(journal.Dir(spec.RunDir)) })
	helper := testenv.Start(t, cmd)
	testenv.WaitFor(t, 30*time.Second, "runnertest start to print the runner's pid", func() bool {
		select {
		case <-helper.Done():
			t.Fatalf("helper ended (%v) before it printed the runner's pid: %s", helper.Err(), out)
		default:
		}
		return strings.HasPrefix(out.String(), "pid ")
	})
	return helper
}

func TestRunnerSurvivesStarterDeath(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	spec := newSpec(t, sh(`echo a; sleep 0.5; echo b`)...)
	helper := runHelper(t, spec, "", nil, t.TempDir())
	helper.Stop(syscall.SIGKILL, 0)
	dir := journal.Dir(spec.RunDir)
	if alive, err := sandbox.Alive(dir); err != nil || !alive {
		t.Fatalf("Alive = %v, %v right after the starter died", alive, err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "a\nb\n" {
		t.Errorf("journal = %q, want the whole run", stdout)
	}
	wantSentinel(t, s, 0, journal.ReasonExit, "")
}

func TestNonRootRunner(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	script := `echo "uid=$(id -u) map=$(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')"; cat`
	spec := newSpec(t, sh(script)...)
	want := 65534
	if os.Geteuid() != 0 {
		// Already unprivileged: the runner maps the sandbox to itself.
		want = os.Geteuid()
		start(t, spec, "in\n")
	} else {
		// A worker running as nobody starts the runner.
		base, err := os.MkdirTemp("", "baton-nonroot-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		home := filepath.Join(base, "nobody")
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, want, want); err != nil {
			t.Fatal(err)
		}
		spec.RunDir = filepath.Join(home, "runs", spec.RunID)
		helper := runHelper(t, spec, "in\n", &syscall.Credential{Uid: uint32(want), Gid: uint32(want)}, home)
		helper.Stop(syscall.SIGKILL, 0)
	}
	stdout, s := waitEnd(t, journal.Dir(spec.RunDir), spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if stdout != "uid=1000 map=1000 0 1\nin\n" {
		t.Errorf("journal = %q", stdout)
	}
	st, err := os.Stat(journal.Dir(spec.RunDir).Journal())
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != want {
		t.Errorf("journal owned by %d, want the unprivileged runner's %d", uid, want)
	}
}

func TestRunnerDeathKillsSandbox(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, sh("echo started; sleep "+m)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	waitPIDs(t, 1, "sleep", m)
	killRunner(dir)
	waitPIDs(t, 0, "sleep", m)
	deadline := time.Now().Add(5 * time.Second)
	for alive, _ := sandbox.Alive(dir); alive; alive, _ = sandbox.Alive(dir) {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held after the runner was killed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := readFile(t, dir.Journal()); got != "started\n" {
		t.Errorf("journal = %q: a killed runner writes no sentinel", got)
	}
}

func TestStartRefuses(t *testing.T) {
	t.Parallel()
	bin := runnerBinary(t)
	ctx := context.Background()

	spec := newSpec(t, "true")
	spec.Network.Allow = []string{"0.0.0.0/0"}
	if _, err := sandbox.Start(ctx, spec, nil, sandbox.WithBinary(bin)); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("Start with an allowlist opening loopback = %v, want ErrInvalidSpec", err)
	}
	if _, err := os.Stat(spec.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Start left %s behind (%v)", spec.RunDir, err)
	}

	spec = newSpec(t, "true")
	spec.Files = map[string]string{"../escape": "x"}
	if _, err := sandbox.Start(ctx, spec, nil, sandbox.WithBinary(bin)); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("Start with an escaping seed file = %v, want ErrInvalidSpec", err)
	}

	spec = newSpec(t, sh("echo once")...)
	dir := start(t, spec, "")
	if _, err := sandbox.Start(ctx, spec, nil, sandbox.WithBinary(bin)); !errors.Is(err, sandbox.ErrRunExists) {
		t.Errorf("second Start of a run = %v, want ErrRunExists", err)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "once\n" {
		t.Errorf("journal = %q", stdout)
	}
	wantSentinel(t, s, 0, journal.ReasonExit, "")
}

func TestSecondRunnerRefused(t *testing.T) {
	t.Parallel()
	bin := runnerBinary(t)
	m := marker(t)
	spec := newSpec(t, sh("echo started; sleep "+m)...)
	dir := start(t, spec, "")
	waitJournal(t, dir, "started\n")
	out, err := testenv.Output(exec.Command(bin, "runner-outer", "--spec", dir.Spec()))
	if err == nil || !strings.Contains(string(out), "another runner holds the run's lock") {
		t.Errorf("a second runner while the first runs: %v, %s", err, out)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	_, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
	out, err = testenv.Output(exec.Command(bin, "runner-outer", "--spec", dir.Spec()))
	if err == nil || !strings.Contains(string(out), "already exists") {
		t.Errorf("a runner for an ended run: %v, %s", err, out)
	}
	if n := len(hostPIDs(t, "sleep", m)); n != 0 {
		t.Errorf("%d agents run after the refused restarts", n)
	}
}

func TestStateRecordsEveryPhase(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh("echo hi")...)
	spec.Env = append(spec.Env, "API_KEY=topsecret")
	dir := start(t, spec, "")
	waitEnd(t, dir, spec.Nonce, 10*time.Second)
	raw := readFile(t, dir.State())
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		var r struct {
			Time, Stage, Phase, Status, Detail string
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("state line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
			t.Errorf("state line %q: time: %v", line, err)
		}
		if r.Status != "ok" {
			t.Errorf("state line %q is not ok", line)
		}
		seen[r.Stage+"/"+r.Phase] = true
	}
	for _, p := range []string{
		"outer/spec", "outer/lock", "outer/pid-file", "outer/journal", "outer/stderr", "outer/prepare", "outer/start-inner", "outer/ready",
		"outer/journal-copy", "outer/inner-exit", "outer/status", "outer/finish",
		"outer/init", "outer/init-exit",
		"inner/loopback-up", "inner/network", "inner/clone-child",
		"inner-child/mount-private", "inner-child/host-sources", "inner-child/root-tmpfs", "inner-child/system-dirs", "inner-child/etc", "inner-child/dev",
		"inner-child/proc", "inner-child/tmp", "inner-child/workspace", "inner-child/home", "inner-child/mounts", "inner-child/pivot-root",
		"inner-child/hostname", "inner-child/resolve-agent", "inner-child/start-agent", "inner-child/agent-exit",
		"inner-child/report",
	} {
		if !seen[p] {
			t.Errorf("state.ndjson has no %s record:\n%s", p, raw)
		}
	}
	if os.Geteuid() == 0 && !seen["outer/drop-privileges"] {
		t.Errorf("a root runner recorded no outer/drop-privileges:\n%s", raw)
	}
	if strings.Contains(raw, "topsecret") || strings.Contains(raw, spec.Nonce) {
		t.Errorf("state.ndjson shows a secret:\n%s", raw)
	}
}

// TestBatonBinaryRunsTheChain runs one agent through the real baton
// binary's hidden runner subcommands, as the worker does.
func TestBatonBinaryRunsTheChain(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	bin := testenv.BatonBinary(t)
	spec := newSpec(t, sh(`read line; echo "got $line"; echo "host=$(cat /proc/sys/kernel/hostname)"; echo oops >&2; exit 5`)...)
	r, err := sandbox.Start(context.Background(), spec, []byte("input\n"), sandbox.WithBinary(bin))
	if err != nil {
		t.Fatalf("Start with the baton binary: %v", err)
	}
	dir := journal.Dir(spec.RunDir)
	t.Cleanup(func() { killRunner(dir) })
	if r.PID <= 0 {
		t.Fatalf("pid %d", r.PID)
	}
	stdout, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	if stdout != "got input\nhost=baton\n" {
		t.Errorf("journal = %q", stdout)
	}
	wantSentinel(t, s, 5, journal.ReasonExit, "")
	if got := readFile(t, dir.Stderr()); got != "oops\n" {
		t.Errorf("stderr.log = %q", got)
	}
}

// TestSpecBatonIsBound: the runner chain runs from one binary (here
// runnertest, as a worker runs it from baton-runner) and the profile's
// "{baton}" names another, the spec's Baton: that one is bound into the
// sandbox and runs. A binary that is neither is not.
func TestSpecBatonIsBound(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	baton := testenv.BatonBinary(t)
	spec := newSpec(t, baton, "fake-agent", "--lines", "3", "--seed", "1")
	spec.Baton = baton
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	if n := strings.Count(stdout, "\n"); n < 3 || !strings.HasPrefix(stdout, "{") {
		t.Errorf("fake agent wrote %d lines:\n%s", n, stdout)
	}

	other := newSpec(t, runnerBinary(t), "netprobe")
	other.Baton = baton
	dir = start(t, other, "")
	_, s = waitEnd(t, dir, other.Nonce, 20*time.Second)
	if s.Exit == 0 {
		t.Fatalf("an agent binary that is not the spec's baton ran: it was bound (%+v)", s)
	}
}

// TestBeforeSpawnVeto: a Start whose before-spawn hook fails spawns
// nothing, removes the run directory, and returns the hook's error; the
// hook sees the directory laid out.
func TestBeforeSpawnVeto(t *testing.T) {
	t.Parallel()
	veto := errors.New("taken over")
	spec := newSpec(t, "echo", "hello")
	dir := journal.Dir(spec.RunDir)
	var sawSpec bool
	_, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(runnerBinary(t)),
		sandbox.WithBeforeSpawn(func() error { _, serr := os.Stat(dir.Spec()); sawSpec = serr == nil; return veto }))
	if !errors.Is(err, veto) || !sawSpec {
		t.Fatalf("Start = %v (hook saw the spec: %v), want the hook's error", err, sawSpec)
	}
	if _, err := os.Stat(string(dir)); !os.IsNotExist(err) {
		t.Fatalf("run directory left behind: %v", err)
	}
	// The same run can start afterwards.
	if _, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(runnerBinary(t)),
		sandbox.WithBeforeSpawn(func() error { return nil })); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killRunner(dir) })
	if stdout, _ := waitEnd(t, dir, spec.Nonce, 20*time.Second); stdout != "hello\n" {
		t.Fatalf("journal %q", stdout)
	}
}

// TestOutputLimit: an agent printing past its output limit is killed; the
// journal holds exactly the first limit bytes it printed (a line cut
// there ended by a newline), then the sentinel with reason output-limit.
// Printing exactly the limit is no offence.
func TestOutputLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	line := "0123456789abcdefghi\n"
	t.Run("forever", func(t *testing.T) {
		t.Parallel()
		spec := newSpec(t, sh("yes 0123456789abcdefghi")...)
		spec.Limits.Output = limit
		dir := start(t, spec, "")
		stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
		if want := strings.Repeat(line, limit/len(line)+1)[:limit] + "\n"; stdout != want {
			t.Errorf("journal before the sentinel: %d bytes ending %q; want the first %d bytes printed and a newline",
				len(stdout), stdout[max(0, len(stdout)-30):], limit)
		}
		if s.Exit != 137 {
			t.Log(readFile(t, dir.State()))
		}
		wantSentinel(t, s, 137, journal.ReasonOutputLimit, "KILL")
		if !strings.Contains(s.Detail, "output limit") || !strings.Contains(s.Detail, "65536 bytes") {
			t.Errorf("detail %q does not name the output limit", s.Detail)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		t.Parallel()
		spec := newSpec(t, sh(fmt.Sprintf("yes 0123456789abcdefghi | head -c %d", limit))...)
		spec.Limits.Output = limit
		dir := start(t, spec, "")
		stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
		if len(stdout) != limit+1 { // the cut line ended by Finish
			t.Errorf("journal holds %d bytes before the sentinel, want %d", len(stdout), limit+1)
		}
		wantSentinel(t, s, 0, journal.ReasonExit, "")
	})
}

// TestIdleRunKeepsTwoRunnerProcesses: while its agent runs, a run's tree
// is runner-outer, the sandbox's init (its child: runner-inner has exited
// and the init was reparented; re-exec'd as the wait stage) and the agent, whose runner-exec stage
// became it: two runner processes, the floor docs/sandbox.md explains.
func TestIdleRunKeepsTwoRunnerProcesses(t *testing.T) {
	t.Parallel()
	m := marker(t)
	spec := newSpec(t, "/bin/sleep", m)
	dir := start(t, spec, "")
	agent := waitPIDs(t, 1, "/bin/sleep", m)[0]
	b, err := os.ReadFile(dir.PID())
	if err != nil {
		t.Fatal(err)
	}
	outer, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// parent and command line of a host pid
	proc := func(pid int) (int, string) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return ppid, strings.Join(strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")[1:], " ")
	}
	// runner-inner exits right after handing the init over: allow it that.
	deadline := time.Now().Add(10 * time.Second)
	for {
		initPID, _ := proc(agent)
		ppid, cmd := proc(initPID)
		if ppid == outer && strings.HasPrefix(cmd, "runner-init-wait ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's parent %d is %q, child of %d; want runner-init-wait, child of runner-outer %d", initPID, cmd, ppid, outer)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := sandbox.Cancel(dir); err != nil {
		t.Fatal(err)
	}
	_, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	wantSentinel(t, s, 143, journal.ReasonCancel, "TERM")
}

// TestInitWaitStageReports: the init that starts and waits for the agent
// is the wait stage runner-inner-child exec'd into, and it reports the
// agent's end as the init always did: the sentinel, and state.ndjson's
// start-agent, agent-exit and report records, with no fallback.
func TestInitWaitStageReports(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, script, signal, record string
		exit                         int
	}{
		{"exit 3", `exit 3`, "", `exit 3 signal \"\"`, 3},
		{"killed by SIGTERM", `kill -TERM $$`, "TERM", `exit 143 signal \"TERM\"`, 143},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, sh(`tr '\0' ' ' < /proc/1/cmdline; echo; `+c.script)...)
			dir := start(t, spec, "")
			stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
			if !strings.HasPrefix(stdout, "baton runner-init-wait --spec /proc/self/fd/") {
				t.Errorf("pid 1 runs %q, want the wait stage", stdout)
			}
			reason := journal.ReasonExit
			if c.signal != "" {
				reason = journal.ReasonSignal
			}
			wantSentinel(t, s, c.exit, reason, c.signal)
			state := readFile(t, dir.State())
			for _, want := range []string{
				`"stage":"inner-child","phase":"start-agent","status":"ok"`,
				// With what the agent used (its rusage, from the init's wait4).
				`"stage":"inner-child","phase":"agent-exit","status":"ok","detail":"` + c.record + `, cpu `,
				`"stage":"inner-child","phase":"report","status":"ok","detail":"` + c.record + `"`,
			} {
				if !strings.Contains(state, want) {
					t.Errorf("state.ndjson lacks %s:\n%s", want, state)
				}
			}
			if strings.Contains(state, `"wait-stage"`) {
				t.Errorf("the init fell back to waiting in-process:\n%s", state)
			}
		})
	}
}

// TestInitReaps: whichever way the sandbox's init reaps (SIGCHLD; the
// kernel, built so, on 6.15 and later), orphans leave no zombie, the agent
// gets SIGCHLD at its default (it can wait for its own children), and its
// exit status comes through; reaping on SIGCHLD, its CPU time and peak
// memory too.
func TestInitReaps(t *testing.T) {
	// Five orphans: each subshell exits at once, its sleep is reparented
	// to the init and exits later. Then: zombies of the pid namespace,
	// a child's status as the agent's shell sees it, and whether the
	// agent's SIGCHLD is ignored.
	const script = `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done
for i in 1 2 3 4 5; do (sleep 0.05 &); done
sleep 0.5
z=0
for f in /proc/[0-9]*/stat; do read -r _ _ st _ < "$f" 2>/dev/null && [ "$st" = Z ] && z=$((z+1)); done
echo zombies=$z
(exit 3); echo child=$?
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)
echo chld_ignored=$(( (0x$ign >> 16) & 1 ))
exit 7`
	for _, tc := range []struct {
		name   string
		binary func(testing.TB) string
	}{
		{"default", runnerBinary},
		{"kernel", kernelRunnerBinary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needSandbox(t)
			spec := newSpec(t, sh(script)...)
			bin := tc.binary(t)
			if _, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(bin)); err != nil {
				t.Fatalf("Start: %v", err)
			}
			dir := journal.Dir(spec.RunDir)
			t.Cleanup(func() { killRunner(dir) })
			stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
			wantSentinel(t, s, 7, journal.ReasonExit, "")
			for _, want := range []string{"zombies=0", "child=3", "chld_ignored=0"} {
				if !strings.Contains(stdout, want+"\n") {
					t.Errorf("agent printed %q, want %s", stdout, want)
				}
			}
			if state := readFile(t, dir.State()); !strings.Contains(state, `"agent-exit"`) {
				t.Errorf("no agent-exit record:\n%s", state)
			}
			// The shell and the processes it waited for: some CPU, a
			// shell's memory.
			if tc.name == "default" && (s.CPUUserUsec+s.CPUSystemUsec <= 0 || s.MaxRSS < 100<<10) {
				t.Errorf("sentinel reports cpu %dus user %dus system, max rss %d; want the agent's", s.CPUUserUsec, s.CPUSystemUsec, s.MaxRSS)
			}
		})
	}
}
