package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ShippedConfig loads the file deploy/<file> of the repository at root as
// shipped, included from a main configuration that gives it a free
// client port and a store under dir. edit, when not nil, makes the
// substitutions a test needs (ports).
func ShippedConfig(t testing.TB, root, dir, file string, edit func(string) string) *server.Options {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", file))
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
	main := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\ninclude ./%s\n", FreePort(t), filepath.Join(dir, "js-"+file), file)
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("deploy/%s: %v", file, err)
	}
	return opts
}

// RunShipped starts a server with opts (ShippedConfig's) and stops it
// when the test ends.
func RunShipped(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("nats-server did not accept connections within 20s")
	}
	return s
}
