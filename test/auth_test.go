package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// TestNATSPermissions runs baton under deploy/nats-auth.conf as shipped: a
// worker, a client and a viewer, each with its own user. A run goes end to
// end, the viewer's live feed gets it, and nobody but the stream can put a
// message on a run's subjects.
func TestNATSPermissions(t *testing.T) {
	bin := testenv.BatonBinary(t)
	pw := map[string]string{"worker": "w-secret", "client": "c-secret", "viewer": "v-secret"}
	for user, p := range pw {
		t.Setenv("BATON_"+strings.ToUpper(user)+"_PASSWORD", p)
	}
	dir := t.TempDir()
	auth, err := os.ReadFile("../deploy/nats-auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-auth.conf"), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	main := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\ninclude ./nats-auth.conf\n", testenv.FreePort(t), filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("deploy/nats-auth.conf: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	url := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@%s", user, pw[user], strings.TrimPrefix(s.ClientURL(), "nats://"))
	}
	names := protocol.MustNames("")

	// Each user's connection records the permission violations it is told of.
	type conn struct {
		nc     *nats.Conn
		mu     sync.Mutex
		denied []string
	}
	connect := func(user string) *conn {
		c := &conn{}
		nc, err := nats.Connect(url(user), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.mu.Lock()
				c.denied = append(c.denied, err.Error())
				c.mu.Unlock()
			}
		}))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		c.nc = nc
		return c
	}
	deniedPublish := func(c *conn, subject string) {
		t.Helper()
		if err := c.nc.Publish(subject, []byte(`{"forged":true}`)); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "a permissions violation for "+subject, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, d := range c.denied {
				if strings.Contains(d, subject) {
					return true
				}
			}
			return false
		})
	}

	workerLog := startWorker(t, bin, url("worker"), testenv.StateDir(t), "auth")
	viewer := connect("viewer")
	live := make(chan *nats.Msg, 1024)
	if _, err := viewer.nc.ChanSubscribe(names.RunFilter("auth-1"), live); err != nil {
		t.Fatal(err)
	}
	if err := viewer.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	submit := bounded.Command(ctx, bin, "submit", "--nats", url("client"), "--profile", "demo", "--run-id", "auth-1", "--watch")
	var out bytes.Buffer
	submit.Stdout, submit.Stderr = &out, &out
	if err := submit.Run(); err != nil {
		t.Fatalf("submit --watch as client: %v\n%s", err, out.String())
	}
	for _, args := range [][]string{{"runs", "get", "auth-1"}, {"dlq"}} {
		cmd := bounded.Command(ctx, bin, append(args, "--nats", url("client"))...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("baton %s as client: %v\n%s", strings.Join(args, " "), err, b)
		}
	}

	// The viewer's live feed had the whole run, ending with its status.
	var last *nats.Msg
	testenv.WaitFor(t, 10*time.Second, "the viewer's terminal status", func() bool {
		for {
			select {
			case m := <-live:
				last = m
			default:
				if last == nil || !strings.HasSuffix(last.Subject, ".status") {
					return false
				}
				st, err := protocol.ParseStatus(last.Data)
				return err == nil && st.Status == protocol.StatusSucceeded
			}
		}
	})

	// The worker did all it does (jobs, KV, chain, micro service) within
	// its permissions.
	if l := workerLog.String(); strings.Contains(strings.ToLower(l), "permissions violation") {
		t.Fatalf("the worker was refused something:\n%s", l)
	}

	// Nobody writes on a run's subjects but the stream, and only a worker
	// feeds the chain.
	deniedPublish(viewer, names.EventsSubject("auth-1"))
	deniedPublish(viewer, names.IngestSubject("auth-1", protocol.KindEvents))
	client := connect("client")
	deniedPublish(client, names.IngestSubject("auth-1", protocol.KindEvents))
	deniedPublish(client, names.StatusSubject("auth-1"))
	deniedPublish(client, "$KV.BATON_LEASES.auth-1")
	worker := connect("worker")
	deniedPublish(worker, names.EventsSubject("auth-1"))
	select {
	case m := <-live:
		t.Fatalf("the viewer got %s %q after the run ended", m.Subject, m.Data)
	case <-time.After(200 * time.Millisecond):
	}
}
