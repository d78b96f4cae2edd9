package test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/internal/testenv"
)

// shippedConfig loads deploy/<file> as shipped, included from a main
// configuration that gives it a free client port and a store under dir.
// edit, when not nil, makes the substitutions a test needs (ports).
func shippedConfig(t *testing.T, dir, file string, edit func(string) string) *server.Options {
	t.Helper()
	b, err := os.ReadFile("../deploy/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		b = []byte(edit(string(b)))
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, file+".main")
	main := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\ninclude ./%s\n", testenv.FreePort(t), filepath.Join(dir, "js-"+file), file)
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("deploy/%s: %v", file, err)
	}
	return opts
}

// runShipped starts a server with opts and stops it when the test ends.
func runShipped(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
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
	return s
}
