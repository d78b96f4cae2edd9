package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/test/internal/e2e"
)

// The systemd tests run deploy/baton-worker.service's [Service] settings
// under a real systemd: PID 1 of its own pid, mount, uts and ipc
// namespaces, booted into a target of its own with every unit of the host
// masked, so it starts nothing but the worker (booting the host's units
// would run tmpfiles cleanups and services against the shared file
// system). The worker reaches the test's NATS server over the shared
// loopback.

const systemdBin = "/lib/systemd/systemd"

// systemctlWait bounds one systemctl command (a start waits for its job).
const systemctlWait = time.Minute

// systemd is one booted instance.
type systemd struct {
	t    *testing.T
	pid  int // systemd, as the host sees it
	logs *testenv.Buffer
}

// bootSystemd starts systemd with the given units installed in its
// runtime unit directory, and waits until it runs.
func bootSystemd(t *testing.T, units map[string]string) *systemd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the systemd tests need root (they boot systemd in namespaces of its own)")
	}
	if _, err := os.Stat(systemdBin); err != nil {
		t.Fatalf("%s: %v: install systemd (apt-get install systemd)", systemdBin, err)
	}
	unitDir := t.TempDir()
	for name, body := range units {
		if err := os.WriteFile(filepath.Join(unitDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Every host unit is masked (the .target and .slice units stay, as
	// systemd needs its slices and starts no target but ours).
	script := `set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/systemd/system
cp "$1"/* /run/systemd/system/
for f in /lib/systemd/system/* /etc/systemd/system/* /usr/lib/systemd/system/*; do
	[ -d "$f" ] && continue
	n=${f##*/}
	case "$n" in *.target|*.slice) continue ;; esac
	[ -e "/run/systemd/system/$n" ] || ln -sf /dev/null "/run/systemd/system/$n"
done
exec env container=baton-test ` + systemdBin + ` --system --unit=baton-test.target --log-target=console --show-status=no`
	logs := &testenv.Buffer{}
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc", "--mount-proc", "--propagation", "private",
		"sh", "-c", script, "sh", unitDir)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := testenv.Start(t, cmd)
	sd := &systemd{t: t, logs: logs}
	t.Cleanup(func() {
		// PID 1 of the namespace: its death ends every process in it.
		if sd.pid > 0 {
			_ = syscall.Kill(sd.pid, syscall.SIGKILL)
		}
		p.Stop(syscall.SIGKILL, 0)
		if t.Failed() {
			t.Logf("systemd's console:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for sd.pid == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("systemd did not start:\n%s", logs.String())
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			if exe, _ := os.Readlink("/proc/" + f[0] + "/exe"); strings.HasSuffix(exe, "/systemd") {
				sd.pid, _ = strconv.Atoi(f[0])
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		out, _ := sd.systemctlOut("is-system-running")
		if out == "running" || out == "degraded" {
			return sd
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd is %q after 30s:\n%s", out, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (sd *systemd) systemctlOut(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(sd.pid), "-m", "-p", "--", "systemctl", "--no-pager"}, args...)...)
	out, err := bounded.Output(context.Background(), systemctlWait, cmd)
	return strings.TrimSpace(string(out)), err
}

func (sd *systemd) systemctl(args ...string) {
	sd.t.Helper()
	if out, err := sd.systemctlOut(args...); err != nil {
		sd.t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// workerUnit is deploy/baton-worker.service for this test: its [Service]
// settings as shipped, but for where the binary, config, state dir and
// NATS are; no dependencies on the host's targets.
func workerUnit(t *testing.T, execStart, natsURL string, edit func(service []string) []string) string {
	t.Helper()
	f, err := os.Open("../deploy/baton-worker.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var service []string
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[Service]" || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		switch k, _, _ := strings.Cut(line, "="); k {
		case "ExecStart", "Environment", "StateDirectory", "StateDirectoryMode":
			continue // the test's paths instead of the host's
		}
		service = append(service, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		service = edit(service)
	}
	return "[Unit]\nDescription=baton worker under test\nDefaultDependencies=no\n\n[Service]\n" +
		strings.Join(service, "\n") + "\nExecStart=" + execStart + "\nEnvironment=NATS_URL=" + natsURL + "\n"
}

const testTarget = "[Unit]\nDescription=baton systemd test\nDefaultDependencies=no\n"

// sdEnv is a node whose worker runs under systemd.
type sdEnv struct {
	t        *testing.T
	sd       *systemd
	nc       *nats.Conn
	stateDir string
	names    protocol.Names
}

func newSDEnv(t *testing.T, edit func([]string) []string) *sdEnv {
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	stateDir := testenv.StateDir(t)
	cfg := filepath.Join(stateDir, "baton.yaml")
	if err := os.WriteFile(cfg, []byte("leaseTTL: 3s\nprofiles:\n  fake:\n    command: [\"{baton}\", fake-agent]\n    allowArgs: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec := fmt.Sprintf("%s worker --config %s --state-dir %s --node sd --grace 10s --log-format json", bin, cfg, stateDir)
	sd := bootSystemd(t, map[string]string{
		"baton-test.target":    testTarget,
		"baton-worker.service": workerUnit(t, exec, s.ClientURL(), edit),
	})
	nc, _ := testenv.Connect(t, s)
	e := &sdEnv{t: t, sd: sd, nc: nc, stateDir: stateDir, names: protocol.MustNames("")}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := sd.systemctlOut("status", "baton-worker.service")
			t.Logf("systemctl status:\n%s", out)
		}
	})
	sd.systemctl("start", "baton-worker.service")
	return e
}

// submit publishes a run of the fake agent that lasts about seconds.
func (e *sdEnv) submit(runID string, seconds int) chaosRun {
	e.t.Helper()
	r := chaosRun{id: runID, args: []string{"--lines", strconv.Itoa(20 * seconds), "--rate", "20", "--seed", "7"}}
	b, _ := json.Marshal(map[string]any{"runId": r.id, "profile": "fake", "args": r.args})
	msg := nats.NewMsg(e.names.RunJobSubject())
	msg.Data = b
	msg.Header.Set(nats.MsgIdHdr, r.id)
	js, _ := e.nc.JetStream()
	// The worker provisions the jobs stream as it starts.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := js.PublishMsg(msg); err == nil {
			break
		} else if time.Now().After(deadline) {
			e.t.Fatalf("submit %s: %v", runID, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

func (e *sdEnv) dir(runID string) journal.Dir {
	return journal.Dir(filepath.Join(e.stateDir, "runs", runID))
}

// waitStarted waits until the run's runner holds its lock.
func (e *sdEnv) waitStarted(runID string) {
	e.t.Helper()
	testenv.WaitFor(e.t, 30*time.Second, "run "+runID+"'s runner", func() bool {
		alive, _ := sandbox.Alive(e.dir(runID))
		return alive
	})
	time.Sleep(500 * time.Millisecond) // a few lines published
}

func (e *sdEnv) assertAlive(runID, after string) {
	e.t.Helper()
	if alive, err := sandbox.Alive(e.dir(runID)); err != nil || !alive {
		e.t.Fatalf("run %s's runner is gone after %s (I4): alive %v, %v", runID, after, alive, err)
	}
}

// TestSystemdRestartAndStopKeepAgents: `systemctl restart` and `stop` of
// the worker unit, as shipped (KillMode=process), never reach a runner;
// the runs end normally and exactly once after the worker comes back.
func TestSystemdRestartAndStopKeepAgents(t *testing.T) {
	e := newSDEnv(t, func(service []string) []string {
		for _, l := range service {
			if l == "KillMode=process" {
				return service
			}
		}
		t.Fatalf("deploy/baton-worker.service does not set KillMode=process: %v", service)
		return nil
	})
	a := e.submit("sd-restart", 8)
	e.waitStarted(a.id)
	e.sd.systemctl("restart", "baton-worker.service")
	e.assertAlive(a.id, "systemctl restart")

	b := e.submit("sd-stop", 8)
	e.waitStarted(b.id)
	e.sd.systemctl("stop", "baton-worker.service")
	e.assertAlive(a.id, "systemctl stop")
	e.assertAlive(b.id, "systemctl stop")
	time.Sleep(time.Second) // the runs go on, unpublished
	e.sd.systemctl("start", "baton-worker.service")

	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	stats := chaosStats{killed: map[int]time.Time{}}
	for _, r := range []chaosRun{a, b} {
		msgs := e2e.WaitChain(t, js, e.names, r.id, 60*time.Second)
		lines := checkRun(t, r, msgs, e.dir(r.id).Journal(), &stats)
		var seen []string
		for _, m := range msgs {
			if strings.HasSuffix(m.Subject(), ".status") {
				st, _ := protocol.ParseStatus(m.Data())
				seen = append(seen, string(st.Status))
			}
		}
		t.Logf("run %s: %d lines, statuses %v", r.id, lines, seen)
		if !strings.Contains(strings.Join(seen, ","), "handoff,attached") {
			t.Errorf("run %s: statuses %v, want a hand-off", r.id, seen)
		}
	}
}

// TestSystemdControlGroupKillsAgents is the control: with systemd's
// default KillMode=control-group, stopping the worker kills its runners,
// which is why the unit sets KillMode=process.
func TestSystemdControlGroupKillsAgents(t *testing.T) {
	e := newSDEnv(t, func(service []string) []string {
		var out []string
		for _, l := range service {
			if !strings.HasPrefix(l, "KillMode=") {
				out = append(out, l)
			}
		}
		return out
	})
	r := e.submit("sd-cgroup", 8)
	e.waitStarted(r.id)
	e.sd.systemctl("stop", "baton-worker.service")
	testenv.WaitFor(t, 10*time.Second, "the runner to die with the unit", func() bool {
		alive, _ := sandbox.Alive(e.dir(r.id))
		return !alive
	})
}
