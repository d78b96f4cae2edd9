package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
)

// TestHangingAnchorIsNA: an anchor command that never ends, and whose
// child holds its output open, makes its start row n/a, saying which
// command hung, at the anchor's limit; it neither fails the row nor holds
// the suite (as Debian 12's pasta once held it until the package's
// timeout).
func TestHangingAnchorIsNA(t *testing.T) {
	bin := testenv.BatonBinary(t)
	// The stand-in runs as the sandbox user for the pasta row.
	dir, err := os.MkdirTemp("", "baton-anchor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pids := filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, pids} {
		if err := os.Chmod(d, map[string]os.FileMode{dir: 0o755, pids: 0o777}[d]); err != nil {
			t.Fatal(err)
		}
	}
	hang := filepath.Join(dir, "hang")
	script := "#!/bin/sh\necho starting\nsleep 3600 &\necho $! > " + pids + "/$$\nwait\n"
	if err := os.WriteFile(hang, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killListed(t, pids) })

	for _, tc := range []struct {
		row string
		set func(e *env, argv []string)
		run func(e *env, ctx context.Context) Result
	}{
		{"start", func(e *env, argv []string) { e.bwrapAnchor = argv }, func(e *env, ctx context.Context) Result { return e.startNone(ctx, quickSizes) }},
		{"start, pasta", func(e *env, argv []string) { e.pastaAnchor = argv }, func(e *env, ctx context.Context) Result { return e.startPasta(ctx, quickSizes) }},
	} {
		t.Run(tc.row, func(t *testing.T) {
			var progress bytes.Buffer
			e, err := newEnv(bin, &progress)
			if err != nil {
				t.Fatal(err)
			}
			defer e.close(false)
			e.anchorLimit = 500 * time.Millisecond
			tc.set(e, []string{hang, "--anchor"})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			began := time.Now()
			res := tc.run(e, ctx)
			took := time.Since(began)
			if res.Pass != na || !strings.Contains(res.Measured, hang+" --anchor: timed out: did not end within") {
				t.Fatalf("row %q %s: %s; want n/a naming the hung anchor\n%s", res.Row, res.Pass, res.Measured, progress.String())
			}
			if ctx.Err() != nil {
				t.Fatalf("the row took %v, past its test's bound", took)
			}
			t.Logf("%s: %s after %v", res.Row, res.Measured, took)
		})
	}
}

// killListed kills the processes whose pids the stand-in wrote in dir.
func killListed(t *testing.T, dir string) {
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
