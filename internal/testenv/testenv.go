// Package testenv gives tests the real parts they run against: an embedded
// nats-server with JetStream, a connection to it, and the baton binary built
// from this module (the runner chain and the fake agent are subcommands of
// it, so tests that start runs need the real binary).
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/bounded"
)

// RunServer starts an embedded JetStream server on a random loopback port,
// storing under a temporary directory, and stops it when the test ends.
func RunServer(t testing.TB) *server.Server {
	t.Helper()
	return RunServerIn(t, t.TempDir(), -1)
}

// RunServerIn starts a server storing in dir on port (-1: random), so a test
// can restart a server on the same port and store.
func RunServerIn(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	return RunServerWith(t, func(o *server.Options) {
		o.StoreDir = dir
		o.Port = port
	})
}

// Connect opens a client connection to s that is closed when the test ends.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to embedded NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// BatonBinary builds ./cmd/baton and ./cmd/baton-runner beside it once per
// test process and returns baton's path. BATON_BIN overrides it with a
// prebuilt binary (with or without baton-runner beside it).
func BatonBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BATON_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "baton-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// World-readable and executable: a root worker's sandbox runs the
		// binary as an unprivileged uid.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "baton")
		cmd := exec.Command("go", "build", "-o", dir, "./cmd/baton")
		cmd.Dir = root
		if buildOut, buildErr = Build(cmd); buildErr != nil {
			return
		}
		// And baton-runner beside it, where workers look for it: static,
		// as README's install line builds it.
		cmd = exec.Command("go", "build", "-o", dir, "./cmd/baton-runner")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = Build(cmd)
	})
	if buildErr != nil {
		t.Fatalf("build baton: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

func moduleRoot() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StepWait)
	defer cancel()
	out, err := bounded.Command(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// RunServerWith starts an embedded JetStream server like RunServer, after
// letting configure adjust its options (e.g. a small max payload).
func RunServerWith(t testing.TB, configure func(*server.Options)) *server.Server {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	configure(&opts)
	s, err := startServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// serverReady bounds how long an embedded server may take to accept
// connections: a 2-core machine running every package's tests at once has
// taken more than the 10 s nats-server's own test helper allows.
const serverReady = 20 * time.Second

// startServer starts a server of opts and waits until it accepts
// connections (clients, and routes when it has a cluster).
func startServer(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server %s: %w", opts.ServerName, err)
	}
	go s.Start()
	if !s.ReadyForConnections(serverReady) {
		s.Shutdown()
		return nil, fmt.Errorf("nats-server %s (cluster port %d) accepted no connections within %s", opts.ServerName, opts.Cluster.Port, serverReady)
	}
	return s, nil
}

// InOrder reports whether s holds each of subs, one after another.
func InOrder(s string, subs ...string) bool {
	for _, sub := range subs {
		i := strings.Index(s, sub)
		if i < 0 {
			return false
		}
		s = s[i+len(sub):]
	}
	return true
}
