package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// hangingTool is a stand-in for a tool the runner runs (pasta, nft) that
// never does its job and never exits: it ignores SIGTERM, and the child
// it waits for holds its output open after it is killed. It lists that
// child's pid in pids, for the test to kill.
func hangingTool(t *testing.T, dir, name, pids string) {
	t.Helper()
	script := "#!/bin/sh\ntrap '' TERM\nsleep 3600 &\necho $! > " + pids + "/" + name + "-$$\nwait\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(dir, name)) })
}

// TestHungNetworkToolFailsTheRun: a pasta that never configures the
// sandbox's network nor exits, or an nft that never returns, ends the run
// as an error whose reason names it, within a bound; the runner exits.
func TestHungNetworkToolFailsTheRun(t *testing.T) {
	needSandbox(t)
	needTun(t)
	// Where the stand-ins go, first on the runner's tool path; the
	// sandbox user runs them.
	base, err := os.MkdirTemp("", "baton-standin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	tools, pids, bin := filepath.Join(base, "tools"), filepath.Join(base, "pids"), filepath.Join(base, "runnertest")
	for d, mode := range map[string]os.FileMode{base: 0o755, tools: 0o755, pids: 0o777} {
		if err := os.MkdirAll(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { killListed(pids) })
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X github.com/batonhq/baton/sandbox/internal/stage.toolPath="+tools+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"./internal/runnertest")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := testenv.Build(build); err != nil {
		t.Fatalf("build the runner with stand-in tools: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		tool string
		// startErr: Start fails (the tool hangs before the runner is
		// ready); else the run fails after it started.
		startErr bool
		want     string
	}{
		{"pasta", false, "pasta configured no default route within"},
		{"nft", true, "-f -: timed out: did not end within"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			hangingTool(t, tools, tc.tool, pids)
			spec := newSpec(t, "/bin/true")
			spec.Network = runspec.Network{Allow: []string{"10.255.255.0/30"}}
			began := time.Now()
			_, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(bin))
			dir := journal.Dir(spec.RunDir)
			t.Cleanup(func() { killRunner(dir) })
			switch {
			case tc.startErr && (!errors.Is(err, sandbox.ErrStartFailed) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Start: %v; want it to fail saying %q", err, tc.want)
			case !tc.startErr && err != nil:
				t.Fatalf("Start: %v", err)
			}
			// Its end, the runner's exit included, within the tool's bound
			// (10s at most) and the runner's stopping of it.
			_, s := waitEnd(t, dir, spec.Nonce, 30*time.Second)
			if s.Reason != journal.ReasonError || !strings.Contains(s.Detail, tc.want) {
				t.Fatalf("sentinel reason %q detail %q; want an error saying %q", s.Reason, s.Detail, tc.want)
			}
			if tc.tool == "pasta" && !strings.Contains(readFile(t, dir.State()), `"phase":"pasta-stop"`) {
				t.Errorf("state.ndjson does not say pasta was killed:\n%s", readFile(t, dir.State()))
			}
			t.Logf("ended after %v: %s", time.Since(began).Round(time.Millisecond), s.Detail)
		})
	}
}

// killListed kills the processes whose pids the stand-ins wrote in dir.
func killListed(dir string) {
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
