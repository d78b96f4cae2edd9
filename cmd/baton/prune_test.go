package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
)

func TestPruneCmd(t *testing.T) {
	state := t.TempDir()
	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"--state-dir", state}, args...))
		err := root.ExecuteContext(t.Context())
		return out.String(), err
	}
	if _, err := run("prune"); err == nil || !strings.Contains(err.Error(), "runs") {
		t.Fatalf("prune of a state dir without runs: %v", err)
	}
	for id, ago := range map[string]time.Duration{"r-old": 50 * time.Hour, "r-new": time.Hour} {
		d := journal.Dir(filepath.Join(state, "runs", id))
		if err := os.MkdirAll(string(d), 0o755); err != nil {
			t.Fatal(err)
		}
		// 3000 bytes written in a 1 GiB sparse file, as a workspace image
		// is: prune reports the blocks it takes, not its apparent size.
		if err := os.WriteFile(d.Journal(), make([]byte, 3000), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(d.Journal(), 1<<30); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.Finished(), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-ago)
		if err := os.Chtimes(d.Finished(), at, at); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(journal.Dir(filepath.Join(state, "runs", "r-old")).Journal(), &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used >= 1<<20 {
		t.Fatalf("the sparse journal takes %d bytes of disk; this filesystem does not keep sparse files", used)
	}
	out, err := run("prune", "--older-than", "48h", "--dry-run")
	want := "would remove 1 run(s), " + byteSize(st.Blocks*512) + ", finished more than 48h0m0s ago"
	if err != nil || !strings.Contains(out, "r-old") || strings.Contains(out, "r-new") || !strings.Contains(out, want) {
		t.Fatalf("dry run: %v\n%s\nwant %q", err, out, want)
	}
	if _, err := os.Stat(filepath.Join(state, "runs", "r-old")); err != nil {
		t.Fatalf("dry run removed r-old: %v", err)
	}
	// Without --older-than: the default retention, 7 days, keeps both.
	if out, err := run("prune"); err != nil || !strings.Contains(out, "removed 0 run(s)") {
		t.Fatalf("default retention: %v\n%s", err, out)
	}
	if out, err := run("prune", "--older-than", "2h"); err != nil || !strings.Contains(out, "removed 1 run(s)") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(state, "runs", "r-old")); !os.IsNotExist(err) {
		t.Fatalf("r-old still there: %v", err)
	}
	if _, err := run("prune", "--older-than", "-1h"); err == nil {
		t.Fatal("negative age accepted")
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 5 << 40: "5120.0 GiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRunnerCheck(t *testing.T) {
	dir := t.TempDir()
	baton := filepath.Join(dir, "baton")
	if c := runnerCheck(baton); c.Severity != "warn" || !strings.Contains(c.Fix, "baton-runner") {
		t.Fatalf("no runner: %+v", c)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton-runner"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if c := runnerCheck(baton); c.Severity != "ok" || !strings.Contains(c.Detail, dir) {
		t.Fatalf("runner beside: %+v", c)
	}
}
