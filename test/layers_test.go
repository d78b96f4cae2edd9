package test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// layers places every package of the module, lowest first: a package may
// import only packages of a lower layer, so the house's arrows point down
// and a new room is placed on purpose. Test files may import anything.
var layers = [][]string{
	// Leaves: the standard library and outside modules only.
	{"internal/bounded", "internal/clock", "policy", "internal/fsat", "internal/fstree", "internal/leader", "internal/natsurl", "internal/pidfd", "internal/runid", "fakeagent",
		"sandbox/internal/seccomp", "sandbox/internal/tlsterm", "test", "test/escapeagent",
		// The end-to-end suites split out of test (a package doc each).
		"test/auth", "test/browser", "test/escape",
		// The TypeScript client's package: its Go test only.
		"clients/js"},
	// The wire and the disk: names, jobs, the journal's writer.
	{"protocol", "journal", "internal/unpack"},
	// The tests' real parts: a server, the binary, a product's tool
	// service (which speaks the wire's names and headers).
	{"internal/testenv"},
	// What the end-to-end suites share: worker processes, a run's chain,
	// docs pages' blocks, a headless browser.
	{"test/internal/e2e"},
	// A run's spec: the file the worker writes and every runner stage
	// reads; the chain read for people, as AG-UI events; and the MCP
	// server the agent finds in its sandbox, with its socket's frames.
	{"sandbox/runspec", "agui", "mcp"},
	// What the sandbox's worker side and its runner stages share (the
	// chain's records, pipes and frames), and the egress proxy and DNS
	// stub the runner serves.
	{"sandbox/internal/chain", "sandbox/internal/egress"},
	// The runner chain's stages; package sandbox, the worker's side, runs
	// them (RunStage) and imports what its doctor checks of them.
	{"sandbox/internal/stage", "sandbox/secrettls"},
	// One store or one mechanism each.
	{"internal/provision", "tenancy", "internal/wsarchive", "kv", "outputs", "runtoken", "journal/follow", "sandbox"},
	// What is built on them.
	{"lease", "client", "publisher", "config", "checkpoint", "sandbox/internal/runnertest"},
	// Sessions: their records and the checkpoints they keep.
	{"session"},
	// The job intake (it reads the profiles' config) and the console.
	{"consumer", "console"},
	// The worker, which runs them all.
	{"worker"},
	{"cmd/baton/internal/bench"},
	// The commands.
	{"cmd/baton", "cmd/baton-runner"},
}

// TestLayers reads the import graph with `go list` and fails on an import
// that points up or sideways within a layer, and on a package no layer
// places.
func TestLayers(t *testing.T) {
	const module = "github.com/batonhq/baton"
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-json=ImportPath,Imports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (waited up to 2 min): %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	listed := map[string]bool{}
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		listed[name] = true
		from, ok := layer[name]
		if !ok {
			t.Errorf("package %s is in no layer: place it in layers (test/layers_test.go)", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if !ours {
				continue
			}
			if to, ok := layer[dep]; ok && to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only", name, from, dep, to)
			}
		}
	}
	for p := range layer {
		if !listed[p] {
			t.Errorf("layers place %s, which go list does not show: take it out", p)
		}
	}
}

// TestRunnerLinksLittle: every runner stage is a start of baton-runner, so
// what it links is start-up time and attack surface; it links no msgpack
// (the job decoder's) and no fsnotify (the journal follower's).
func TestRunnerLinksLittle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "github.com/batonhq/baton/cmd/baton-runner").Output()
	if err != nil {
		t.Fatalf("go list -deps (waited up to 2 min): %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/vmihailenco/msgpack", "github.com/fsnotify/fsnotify"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("baton-runner links %s", dep)
			}
		}
	}
}
