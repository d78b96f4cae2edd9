package test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestReadmeWorkspaceWithNatsCLI runs the "From any language" commands of
// docs/outputs-and-workspaces.md ("Seeding a workspace") as they are (tar, sha256sum, nats object put, nats pub) and
// checks that the run's agent sees the archive's files.
func TestReadmeWorkspaceWithNatsCLI(t *testing.T) {
	nats := natsCLI(t)
	readme, err := os.ReadFile("../docs/outputs-and-workspaces.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)From any language:\n\n```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal(`docs/outputs-and-workspaces.md has no sh block after "From any language:" under "Seeding a workspace"`)
	}
	script := strings.Replace(string(m[1]), `\"profile\":\"claude\"`, `\"profile\":\"ws\"`, 1)
	if script == string(m[1]) {
		t.Fatal("the job of docs/outputs-and-workspaces.md no longer names the claude profile this test replaces")
	}
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n  ws:\n    command: [/bin/sh, -c, 'test \"$(cat src/main.go)\" = \"package main\" && echo \"{\\\"seeded\\\":true}\"']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.StartWorker(t, bin, s.ClientURL(), testenv.StateDir(t), "cli", "--config", cfg)
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	// The commands need the workspaces stream and the jobs stream, which
	// the worker provisions one after the other.
	waitStream(t, js, names.JobsStream())
	waitStream(t, js, names.WorkspacesStream())

	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "repo", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "repo", "src", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := bounded.Command(ctx, "/bin/sh", "-ec", script)
	sh.Dir = work
	sh.Env = append(os.Environ(), "NATS_URL="+s.ClientURL(), "PATH="+filepath.Dir(nats)+":"+os.Getenv("PATH"))
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the commands of docs/outputs-and-workspaces.md: %v\n%s", err, b)
	}
	var seeded bool
	cl, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Watch(ctx, "run-43", func(ev client.Event) error {
		seeded = seeded || strings.Contains(string(ev.Data), `"seeded":true`)
		return nil
	})
	if err != nil || st.Status != protocol.StatusSucceeded || !seeded {
		t.Fatalf("run-43: %+v, %v; the agent saw the archive: %v", st, err, seeded)
	}
}
