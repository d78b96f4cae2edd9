package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/worker"
)

// TestReloadOnHUP: a SIGHUP reads the file again and gives the worker its
// new tenancy; a file that does not load changes nothing; keys only a
// restart applies are named.
func TestReloadOnHUP(t *testing.T) {
	s := testenv.RunServer(t)
	nc, _ := testenv.Connect(t, s)
	path := filepath.Join(t.TempDir(), "baton.yaml")
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("keyConcurrency: {default: 2}\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(nc, cfg, worker.WithStateDir(t.TempDir()), worker.WithNode("hup"))
	if err != nil {
		t.Fatal(err)
	}
	var log testenv.Buffer
	loads := make(chan error, 8)
	load := func() (*config.Config, error) {
		c, err := config.Load(path)
		loads <- err
		return c, err
	}
	stop := reloadOnHUP(w, cfg, load, zerolog.New(&log))
	defer stop()
	hup := func() error {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-loads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10 s of a SIGHUP")
		}
		return nil
	}
	write("concurrency: 9\nkeyConcurrency: {default: 5, keys: {acme: 1}}\nkeyWeights: {acme: 2}\n")
	if err := hup(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the reloaded tenancy", func() bool {
		ten := w.Tenancy()
		return ten.Limit("bolt") == 5 && ten.Limit("acme") == 1 && ten.Weight("acme") == 2
	})
	testenv.WaitFor(t, 5*time.Second, "the log to name concurrency as needing a restart", func() bool {
		return strings.Contains(log.String(), "a restart applies them") && strings.Contains(log.String(), "concurrency")
	})
	write("keyConcurrency: {default: -1}\n")
	if err := hup(); err == nil || !strings.Contains(err.Error(), "keyConcurrency.default") {
		t.Fatalf("a bad file: %v", err)
	}
	testenv.WaitFor(t, 5*time.Second, "the log to say the file does not load", func() bool {
		return strings.Contains(log.String(), "does not load; nothing changed")
	})
	if w.Tenancy().Limit("bolt") != 5 {
		t.Fatalf("a file that does not load changed the tenancy: %+v", w.Tenancy())
	}
}
