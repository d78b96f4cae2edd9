package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// TestSandboxFilesystem: the agent's root is built, not the host's: the
// system directories read-only, a generated /etc, a minimal /dev, a
// private /tmp, the workspace, and nothing else of the host.
func TestSandboxFilesystem(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	hostWS := journal.Dir(spec.RunDir).Workspace()
	ws := runspec.WorkspacePath
	script := fmt.Sprintf(`
echo "root=$(ls -A / | tr '\n' ' ')"
echo "home=$(ls -A /home | tr '\n' ' ')"
touch /home/agent/x && echo "home-writable=yes"
touch /home/y 2>/dev/null && echo "writable=/home"
echo "etc=$(ls -A /etc | tr '\n' ' ')"
echo "dev=$(ls -A /dev | tr '\n' ' ')"
echo "tmp=$(ls -A /tmp | tr '\n' ' ')"
echo "whoami=$(id -un):$(id -gn)"
echo "passwd=$(grep '^agent:' /etc/passwd)"
echo "hostname=$(hostname)"
for p in /etc/shadow /root /run /var/run /sys /work /mnt %[2]s %[2]s/journal.ndjson %[2]s/spec.json; do
	[ -e "$p" ] && echo "visible=$p"
done
for p in / /usr /etc /dev /proc/sys; do
	touch "$p/baton-probe" 2>/dev/null && echo "writable=$p"
done
touch /tmp/x && echo "tmp-writable=yes"
touch %[1]s/x && echo "workspace-writable=yes"
echo hi > /dev/null && echo "devnull=ok"
head -c 4 /dev/urandom | wc -c | sed 's/^/urandom=/'
echo 1 > /proc/sys/kernel/hostname 2>/dev/null && echo "proc-sys=writable"
awk '$5 == "/" || $5 == "/usr" || $5 == "/tmp" || $5 == "/proc/sys" || $5 == "%[1]s" || $5 == "/home/agent" || $5 == "/dev" || $5 == "/etc/ssl/certs" { print "mnt" $5 "=" $6 }' /proc/self/mountinfo
`, ws, spec.RunDir)
	m, stdout := facts(t, spec, script)
	// / holds the system directories the host has, the sandbox's own, the
	// workspace and the home; nothing else (no path of the host's run
	// directory).
	allowed := []string{"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr", "workspace", "home"}
	root := strings.Fields(m["root"])
	for _, e := range root {
		if !slices.Contains(allowed, e) {
			t.Errorf("/ holds %q: %q", e, root)
		}
	}
	for _, e := range []string{"dev", "etc", "proc", "tmp", "usr", "workspace", "home"} {
		if !slices.Contains(root, e) {
			t.Errorf("/ lacks %s: %q", e, root)
		}
	}
	for _, want := range []string{"passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "hostname", "ssl", "ld.so.cache"} {
		if !slices.Contains(strings.Fields(m["etc"]), want) {
			t.Errorf("/etc = %q lacks %s", m["etc"], want)
		}
	}
	for _, bad := range []string{"shadow", "gshadow", "sudoers", "ssh", "machine-id", "baton"} {
		if slices.Contains(strings.Fields(m["etc"]), bad) {
			t.Errorf("/etc = %q shows the host's %s", m["etc"], bad)
		}
	}
	if got, want := strings.Fields(m["dev"]), []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}; !sameSet(got, want) {
		t.Errorf("/dev = %q, want %q", got, want)
	}
	if m["home"] != "agent" || m["home-writable"] != "yes" {
		t.Errorf("/home holds %q (the agent's writable: %q), want agent alone", m["home"], m["home-writable"])
	}
	if m["whoami"] != "agent:agent" || !strings.HasPrefix(m["passwd"], "agent:x:1000:1000:") || !strings.Contains(m["passwd"], ":/home/agent:") {
		t.Errorf("identity %q, passwd %q", m["whoami"], m["passwd"])
	}
	if m["hostname"] != "baton" {
		t.Errorf("hostname %q", m["hostname"])
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "visible=") || strings.HasPrefix(line, "writable=") || strings.HasPrefix(line, "proc-sys=") {
			t.Errorf("the sandbox leaks: %s", line)
		}
	}
	if m["tmp-writable"] != "yes" || m["workspace-writable"] != "yes" || m["devnull"] != "ok" || m["urandom"] != "4" {
		t.Errorf("usable parts: tmp %q workspace %q /dev/null %q urandom %q", m["tmp-writable"], m["workspace-writable"], m["devnull"], m["urandom"])
	}
	// Read-only for real: the mounts say so, not just the permissions.
	for mnt, want := range map[string][]string{
		"/": {"ro", "nosuid", "nodev"}, "/usr": {"ro", "nosuid", "nodev"}, "/proc/sys": {"ro"}, "/dev": {"ro", "nosuid", "noexec"},
		"/etc/ssl/certs": {"ro", "nosuid", "nodev"}, "/tmp": {"rw", "nosuid", "nodev"}, ws: {"rw", "nosuid", "nodev"},
		"/home/agent": {"rw", "nosuid", "nodev"},
	} {
		opts := strings.Split(m["mnt"+mnt], ",")
		for _, o := range want {
			if !slices.Contains(opts, o) {
				t.Errorf("%s is mounted %q, want %s", mnt, m["mnt"+mnt], o)
			}
		}
	}
	for _, p := range []string{filepath.Join(hostWS, "x"), filepath.Join(journal.Dir(spec.RunDir).Home(), "x")} {
		if b, err := os.ReadFile(p); err != nil || len(b) != 0 {
			t.Errorf("the agent's file is not on the host: %v", err)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestAgentPrivileges: the agent holds no capability, not even in its
// bounding set, runs with no_new_privs under the seccomp filter, and
// cannot make a user namespace or mount anything.
func TestAgentPrivileges(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.AgentUID, spec.AgentGID = 1500, 1600
	script := `
awk '/^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):/ { print $1 $2 }' /proc/self/status | tr ':' '='
echo "ids=$(id -u):$(id -g)"
unshare -U true 2>/dev/null && echo "userns=created" || echo "userns=refused"
unshare -Ur true 2>/dev/null && echo "userns-root=created" || echo "userns-root=refused"
mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>/dev/null && echo "mount=done" || echo "mount=refused"
umount -l /tmp 2>/dev/null && echo "umount=done" || echo "umount=refused"
`
	m, _ := facts(t, spec, script)
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if m[k] != "0000000000000000" {
			t.Errorf("%s = %q, want no capability", k, m[k])
		}
	}
	if m["NoNewPrivs"] != "1" || m["Seccomp"] != "2" || m["Seccomp_filters"] != "1" {
		t.Errorf("NoNewPrivs %q Seccomp %q filters %q", m["NoNewPrivs"], m["Seccomp"], m["Seccomp_filters"])
	}
	if m["ids"] != "1500:1600" {
		t.Errorf("ids = %q, want the spec's 1500:1600", m["ids"])
	}
	for _, k := range []string{"userns", "userns-root", "mount", "umount"} {
		if m[k] != "refused" {
			t.Errorf("%s = %q, want refused", k, m[k])
		}
	}
}

// TestInitTakesNoSignal: the agent shares its init's host uid, so the
// kernel lets it signal pid 1; init ignores every signal but SIGCHLD.
func TestInitTakesNoSignal(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	script := `
for s in HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM STKFLT TSTP TTIN TTOU XCPU XFSZ VTALRM PROF SYS KILL STOP; do
	kill -s $s 1 2>/dev/null
done
sleep 0.2
kill -0 1 && echo "init=alive"
echo "state=$(awk '/^State:/ {print $2}' /proc/1/status)"
`
	m, _ := facts(t, spec, script)
	if m["init"] != "alive" || m["state"] != "S" {
		t.Errorf("init %q in state %q after the agent signalled it", m["init"], m["state"])
	}
}

// TestRlimits: the profile's limits apply to the agent; nproc comes from
// pids and counts only this run's processes.
func TestRlimits(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Limits = runspec.Limits{Pids: 40, Rlimits: runspec.Rlimits{"nofile": 64, "fsize": 1 << 20}}
	script := `
awk '/^Max (open files|processes|file size|core file size)/ { gsub(/ /, "_", $0); print }' /proc/self/limits | sed -E 's/^Max_([a-z_]+[a-z])_+([0-9a-z]+)_+([0-9a-z]+).*/\1=\2 \3/'
head -c 3000000 /dev/zero > big; echo "head=$?"
echo "big=$(stat -c %s big)"
`
	m, _ := facts(t, spec, script)
	for k, want := range map[string]string{"open_files": "64 64", "processes": "40 40", "file_size": "1048576 1048576", "core_file_size": "0 0", "big": "1048576"} {
		if m[k] != want {
			t.Errorf("%s = %q, want %q", k, m[k], want)
		}
	}
	if m["head"] != "153" { // 128 + SIGXFSZ
		t.Errorf("writing past fsize: exit %q, want 153 (SIGXFSZ)", m["head"])
	}
}

// TestProfileMounts: read-only unless writable, at the target asked, and
// the host sees what the agent wrote through a writable one.
func TestProfileMounts(t *testing.T) {
	t.Parallel()
	base := worldDir(t)
	ro, rw := filepath.Join(base, "tools"), filepath.Join(base, "out")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "tool.txt"), []byte("tool\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t)
	spec.Mounts = []runspec.Mount{{Source: ro}, {Source: rw, Target: "/srv/out", Writable: true}}
	script := fmt.Sprintf(`
echo "read=$(cat %[1]s/tool.txt)"
echo x > %[1]s/new 2>/dev/null && echo "ro-write=done" || echo "ro-write=refused"
echo out > /srv/out/result && echo "rw-write=done"
`, ro)
	m, _ := facts(t, spec, script)
	if m["read"] != "tool" || m["ro-write"] != "refused" || m["rw-write"] != "done" {
		t.Errorf("read %q, read-only write %q, writable write %q", m["read"], m["ro-write"], m["rw-write"])
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "result")); string(b) != "out\n" {
		t.Errorf("the host sees %q through the writable mount", b)
	}
}

// worldDir is a directory every uid can search (t.TempDir's parents are
// 0700), for mount sources the sandbox uid must reach.
func worldDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "baton-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStartFailsWithoutWhatTheProfileNeeds: a run whose profile needs what
// this host lacks does not start: Start says what is missing, the journal
// ends with an error sentinel saying it too, and no agent runs.
func TestStartFailsWithoutWhatTheProfileNeeds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*sandbox.Spec)
		detail string
	}{
		{"missing mount", func(s *sandbox.Spec) { s.Mounts = []runspec.Mount{{Source: "/no/such/dir"}} }, "mount /no/such/dir"},
		{"mount of the run directories", func(s *sandbox.Spec) {
			s.Mounts = []runspec.Mount{{Source: filepath.Dir(s.RunDir), Target: "/srv/runs"}}
		}, "would show the node's run directories"},
		{"mount of /", func(s *sandbox.Spec) { s.Mounts = []runspec.Mount{{Source: "/", Target: "/srv/host"}} }, "would show the node's run directories"},
		{"memory without a cgroup", func(s *sandbox.Spec) { s.Limits.Memory = 64 << 20 }, "needs a delegated cgroup v2"},
		{"cgroup v1", func(s *sandbox.Spec) { s.Limits.CPUs = 1; s.CgroupParent = "/sys/fs/cgroup/cpu" }, "not a cgroup v2 directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, sh("echo ran")...)
			c.mutate(&spec)
			needSandbox(t)
			_, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(runnerBinary(t)))
			if !errors.Is(err, sandbox.ErrStartFailed) || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("Start = %v, want ErrStartFailed mentioning %q", err, c.detail)
			}
			stdout, s := waitEnd(t, journal.Dir(spec.RunDir), spec.Nonce, 10*time.Second)
			if stdout != "" || s.Reason != journal.ReasonError || !strings.Contains(s.Detail, c.detail) {
				t.Errorf("journal %q, sentinel %+v; want an error mentioning %q", stdout, s, c.detail)
			}
		})
	}
}

// needTun makes /dev/net/tun usable by the sandbox uid, as `baton doctor`
// tells an operator to: pasta opens it as that uid.
func needTun(t testing.TB) {
	t.Helper()
	st, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Fatalf("pasta needs /dev/net/tun: %v (modprobe tun)", err)
	}
	if st.Mode().Perm()&0o006 != 0o006 {
		if os.Geteuid() != 0 {
			t.Fatalf("/dev/net/tun is %v: the sandbox uid cannot open it (chmod 0666 /dev/net/tun)", st.Mode().Perm())
		}
		if err := os.Chmod("/dev/net/tun", 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

func helloHost(t testing.TB) *testenv.TestHost {
	return testenv.NewTestHost(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the test host\n")
	}))
}

// TestNetworkProxyOnly: an allowlist of names is loopback only, the proxy
// and DNS stub on it; a name pinned to a private address gets nothing.
func TestNetworkProxyOnly(t *testing.T) {
	t.Parallel()
	host := helloHost(t)
	spec := newSpec(t)
	spec.Network = runspec.Network{Allow: []string{"th.test"}, Hosts: map[string]string{"th.test": host.Addr.String()}}
	script := fmt.Sprintf(`
echo "ifaces=$(ls /proc/sys/net/ipv4/conf | grep -v -e all -e default | tr '\n' ' ')"
echo "proxy=$(curl -sS -m 5 http://th.test:%[1]d/ 2>&1)"
echo "direct=$(curl -sS -m 2 --noproxy '*' http://%[2]s:%[1]d/ 2>&1 | head -c 40)"
echo "resolve=$(getent hosts th.test)"
echo "resolve-other=$(getent hosts example.com)"
`, host.Port, host.Addr)
	m, _ := facts(t, spec, script)
	if m["ifaces"] != "lo" {
		t.Errorf("interfaces %q, want lo only", m["ifaces"])
	}
	if !strings.Contains(m["proxy"], "baton egress proxy") || !strings.Contains(m["proxy"], "private address") {
		t.Errorf("proxy to a private address without a CIDR entry: %q", m["proxy"])
	}
	if strings.Contains(m["direct"], "hello") || m["resolve"] != "" || m["resolve-other"] != "" {
		t.Errorf("direct %q, resolve %q, other %q", m["direct"], m["resolve"], m["resolve-other"])
	}
}

// TestNetworkPasta: with the test host's /30 listed, the agent reaches it
// through the proxy by name and directly through pasta; the host's end of
// the pair, an address of the host, stays out of reach both ways.
func TestNetworkPasta(t *testing.T) {
	t.Parallel()
	needTun(t)
	host := helloHost(t)
	spec := newSpec(t)
	spec.Network = runspec.Network{Allow: []string{"th.test", host.Prefix.String()}, Hosts: map[string]string{"th.test": host.Addr.String()}}
	script := fmt.Sprintf(`
echo "proxy=$(curl -sS -m 5 http://th.test:%[1]d/ 2>&1)"
echo "direct=$(curl -sS -m 5 --noproxy '*' http://%[2]s:%[1]d/ 2>&1)"
echo "hostside-direct=$(curl -sS -m 2 --noproxy '*' http://%[3]s:%[1]d/ 2>&1 | head -c 60)"
echo "hostside-proxy=$(curl -sS -m 5 http://%[3]s:%[1]d/ 2>&1)"
echo "resolve=$(getent hosts th.test | awk '{print $1}')"
`, host.Port, host.Addr, host.HostSide)
	spec.Argv = sh(script)
	dir := start(t, spec, "")
	stdout, s := waitEnd(t, dir, spec.Nonce, 30*time.Second)
	wantSentinel(t, s, 0, journal.ReasonExit, "")
	m := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	if m["proxy"] != "hello from the test host" || m["direct"] != "hello from the test host" {
		t.Errorf("allowed traffic: proxy %q, direct %q", m["proxy"], m["direct"])
	}
	if strings.Contains(m["hostside-direct"], "hello") || !strings.Contains(m["hostside-proxy"], "address of the host") {
		t.Errorf("the host's address: direct %q, proxy %q", m["hostside-direct"], m["hostside-proxy"])
	}
	if m["resolve"] != host.Addr.String() {
		t.Errorf("th.test resolves to %q", m["resolve"])
	}
	state := readFile(t, dir.State())
	for _, phase := range []string{`"phase":"pasta-start"`, `"phase":"nft"`, `"phase":"pasta-ready"`, `"phase":"egress-sockets"`} {
		if !strings.Contains(state, phase) {
			t.Errorf("state.ndjson lacks %s", phase)
		}
	}
	// The proxy's refusal of the host's address is recorded as a refusal.
	if !regexp.MustCompile(`"phase":"egress","status":"refused","detail":"proxy: GET http://` + regexp.QuoteMeta(host.HostSide.String())).MatchString(state) {
		t.Errorf("state.ndjson records no refusal of the host's address:\n%s", state)
	}
}

// TestNetworkPastaAnyUser needs no test host, so it runs as any user: a
// CIDR entry brings pasta's interface and default route, the egress
// sockets and the ruleset, and loopback of the host stays out of reach.
func TestNetworkPastaAnyUser(t *testing.T) {
	t.Parallel()
	needTun(t)
	spec := newSpec(t)
	spec.Network = runspec.Network{Allow: []string{"api.example.com", "10.255.255.0/30"}}
	script := `
echo "ifaces=$(ls /proc/sys/net/ipv4/conf | grep -v -e all -e default | wc -l)"
echo "route=$(awk '$2 == "00000000" { print "default" }' /proc/net/route | head -1)"
echo "proxy-loopback=$(curl -sS -m 5 -x http://127.0.0.1:3128 --noproxy '' -p http://127.0.0.1:4222/ 2>&1 | head -c 200)"
echo "dns-other=$(getent hosts example.com || echo refused)"
`
	m, _ := facts(t, spec, script)
	if m["ifaces"] != "2" || m["route"] != "default" {
		t.Errorf("interfaces %q, default route %q: want lo and pasta's tap", m["ifaces"], m["route"])
	}
	if !strings.Contains(m["proxy-loopback"], "403") && !strings.Contains(m["proxy-loopback"], "Forbidden") {
		t.Errorf("CONNECT to the host's loopback: %q", m["proxy-loopback"])
	}
	if m["dns-other"] != "refused" {
		t.Errorf("a name off the list resolved: %q", m["dns-other"])
	}
}
