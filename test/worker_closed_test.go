package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// A worker whose NATS connection is closed for good (here: its password
// revoked, so the server kicks it and refuses it twice, after which nats.go
// never reconnects; the same as any -ERR nats.go takes as fatal) exits
// non-zero with the reason logged, so its supervisor starts another, instead
// of living on disconnected for ever. The run it held lives on (I4): the
// next worker, with the new password, takes it to its end.
func TestWorkerExitsWhenConnectionClosedForGood(t *testing.T) {
	// Runs beside the package's other waiting tests, after its sequential
	// ones: it waits on its run's 20 s and the refused reconnects, each wait
	// bounded far above what it takes, and measures nothing of the machine.
	t.Parallel()
	bin := testenv.BatonBinary(t)
	dir := t.TempDir()
	conf, port := filepath.Join(dir, "nats.conf"), testenv.FreePort(t)
	writeConf := func(workerPassword string) {
		c := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n"+
			"authorization { users: [ {user: worker, password: %q}, {user: admin, password: admin} ] }\n",
			port, filepath.Join(dir, "js"), workerPassword)
		if err := os.WriteFile(conf, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConf("first")
	// A nats-server process, reloaded by SIGHUP: an embedded server's
	// reload races with its own accept loop under the race detector.
	srv := exec.Command(natsServerBinary(t), "-c", conf)
	srvLog := &testenv.Buffer{}
	srv.Stdout, srv.Stderr = srvLog, srvLog
	sp := testenv.Start(t, srv)
	t.Cleanup(func() {
		sp.Stop(syscall.SIGTERM, 15*time.Second)
		if t.Failed() {
			t.Logf("nats-server's log:\n%s", srvLog.String())
		}
	})
	testenv.WaitFor(t, 30*time.Second, "nats-server accepting connections", func() bool {
		nc, err := nats.Connect(fmt.Sprintf("nats://admin:admin@127.0.0.1:%d", port))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	stateDir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("leaseTTL: 3s\nprofiles:\n  fake:\n    command: [\"{baton}\", fake-agent]\n    allowArgs: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := func(user, password string) string {
		return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, password, port)
	}

	logs := &testenv.Buffer{}
	cmd := exec.Command(bin, "worker", "--nats", url("worker", "first"), "--state-dir", stateDir, "--node", "n1",
		"--log-format", "json", "--config", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	p := testenv.Start(t, cmd)
	t.Cleanup(func() {
		p.Stop(os.Interrupt, 15*time.Second)
		if t.Failed() {
			t.Logf("first worker's logs:\n%s", logs.String())
		}
	})
	testenv.WaitFor(t, 30*time.Second, "the worker ready", func() bool { return strings.Contains(logs.String(), "worker ready") })

	nc, err := nats.Connect(url("admin", "admin"), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	names := protocol.MustNames("")
	status := func(runID string) protocol.StatusType {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, names.EventsStream())
		if err != nil {
			return ""
		}
		m, err := st.GetLastMsgForSubject(ctx, names.StatusSubject(runID))
		if err != nil {
			return ""
		}
		parsed, _ := protocol.ParseStatus(m.Data)
		return parsed.Status
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const runID = "closed-held"
	if out, err := bounded.Command(ctx, bin, "submit", "--nats", url("admin", "admin"), "--run-id", runID, "--profile", "fake",
		"--arg=--duration", "--arg=20s", "--arg=--rate", "--arg=5").CombinedOutput(); err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	testenv.WaitFor(t, 30*time.Second, "the run started", func() bool { return status(runID) == protocol.StatusStarted })

	// Revoked: the server kicks the worker and refuses its reconnects.
	writeConf("second")
	if err := srv.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker lives on 30s after its connection was closed for good:\n%s", logs.String())
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.ExitCode() == 0 {
		t.Fatalf("the worker ended with %v, want a non-zero exit", p.Err())
	}
	if l := strings.ToLower(logs.String()); !strings.Contains(l, "the nats connection was closed for good") || !strings.Contains(l, "authorization violation") {
		t.Fatalf("the worker's logs do not say why it exited:\n%s", logs.String())
	}
	t.Logf("the worker exited %d, %v after its password was revoked", ee.ExitCode(), time.Since(start).Round(time.Millisecond))

	// Its supervisor starts another, with the new password: the run the
	// first held was never stopped, and ends as its agent does.
	e2e.StartWorker(t, bin, url("worker", "second"), stateDir, "n1", "--config", cfg)
	testenv.WaitFor(t, 60*time.Second, "the held run to succeed under the next worker", func() bool { return status(runID) == protocol.StatusSucceeded })
}
