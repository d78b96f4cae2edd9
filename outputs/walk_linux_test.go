package outputs_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/outputs"
)

// chain makes what an agent's `mkdir name; cd name` done n times makes
// under dir, relative to the last directory each time (the path is longer
// than PATH_MAX), and writes a file "f" in the directories at the levels
// in files (1 is the first directory made). It returns the last
// directory, open.
func chain(t *testing.T, dir, name string, n int, files ...int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int]bool{}
	for _, l := range files {
		at[l] = true
	}
	for level := 1; level <= n; level++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatalf("mkdir at level %d: %v", level, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("cd at level %d: %v", level, err)
		}
		fd = next
		if at[level] {
			f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Write(f, []byte("at level\n")); err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
		}
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// F4: a chain of 18,000 directories made by the agent. The walk goes by
// descriptors, one step each, down to MaxDepth, and notes and skips the
// rest: the capture returns in seconds with bounded memory (on the walk by
// whole paths it took ~8 minutes and 675 MB, then was handed on and taken
// again for ever).
func TestCaptureDeepChain(t *testing.T) {
	obs := newStore(t)
	ws := t.TempDir()
	write(t, ws, "top.txt", "top\n")
	// The chain's making, by descriptors as the walk goes, is the anchor
	// of the capture's time: a loaded disk or CPU slows both alike.
	made := time.Now()
	chain(t, ws, "a", 18_000, 100, outputs.MaxDepth, outputs.MaxDepth+1, 18_000)
	anchor := time.Since(made)

	// Generous: the walk by whole paths took ~8 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	res, err := outputs.Capture(ctx, obs, "run-deep", ws, nil, outputs.Policy{Diff: true, Files: []string{"**/f"}})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("capture after %v: %v", took, err)
	}
	t.Logf("18,000 levels: capture took %v (%.2f times the chain's making, %v), allocated %d KiB",
		took, float64(took)/float64(anchor), anchor, (after.TotalAlloc-before.TotalAlloc)>>10)
	// Over 5 s and over 10 times the making of all 18,000 levels (of which
	// it walks 256), not 5 s alone: a loaded CI slows the disk 100 times.
	if took > 5*time.Second && took > 10*anchor {
		t.Errorf("capture of an 18,000-level chain took %v, %.0f times its making's %v", took, float64(took)/float64(anchor), anchor)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("capture of an 18,000-level chain allocated %d MiB", alloc>>20)
	}
	if !strings.HasPrefix(res.Error, outputs.ErrLimit.Error()) || !strings.Contains(res.Error, "1 workspace entries were skipped, deeper than 256 directories") {
		t.Errorf("error %q does not say what was skipped", res.Error)
	}
	deepest := strings.TrimSuffix(strings.Repeat("a/", outputs.MaxDepth+1), "/")
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, ": skipped: deeper than 256 directories") ||
		!strings.Contains(notes, deepest[:256]) {
		t.Errorf("notes %q do not name the skipped directory", res.Notes)
	}
	// Everything within the bound is captured: the files at levels 100
	// and 256, in the diff and as files; none below.
	at := func(level int) string { return strings.Repeat("a/", level) + "f" }
	want := map[string]bool{"run-deep/diff.patch": true, outputs.FileName("run-deep", at(100)): true, outputs.FileName("run-deep", at(outputs.MaxDepth)): true}
	if len(res.Outputs) != len(want) {
		t.Fatalf("outputs %+v, want %v", res.Outputs, want)
	}
	for _, o := range res.Outputs {
		if !want[o.Name] {
			t.Errorf("unexpected output %+v", o)
		}
	}
	patch := string(get(t, obs, "run-deep/diff.patch"))
	if !strings.Contains(patch, "b/top.txt") || !strings.Contains(patch, "b/"+at(outputs.MaxDepth)+"\n") || strings.Contains(patch, "b/"+at(outputs.MaxDepth+1)) {
		t.Errorf("patch (%d bytes) is not the workspace within %d levels", len(patch), outputs.MaxDepth)
	}
}

// F5 and F7: names as long as the kernel allows. A file whose path fits in
// MaxPathBytes is stored under its digest with its path beside it; one past
// it, and a tree of 40 KB paths (an archive's, or the agent's), are noted
// and skipped, never kept whole.
func TestCaptureLongPaths(t *testing.T) {
	obs := newStore(t)
	ws := t.TempDir()
	seg := strings.Repeat("d", 250)
	// 15 directories of 250 bytes and a file of 250: 4,015 bytes.
	chain(t, ws, seg, 15, 15)
	fits := strings.Repeat(seg+"/", 15) + "f"
	// 160 directories: 40 KB paths, with 2,000 files of 250-byte names at
	// the bottom.
	bottom := chain(t, ws, "x"+seg[1:], 160)
	for i := range 2000 {
		f, err := unix.Openat(bottom, fmt.Sprintf("%04d%s", i, seg[4:]), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := outputs.Capture(ctx, obs, "run-long", ws, nil, outputs.Policy{Diff: true, Files: []string{"**"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 2 || res.Outputs[1].Name != outputs.FileName("run-long", fits) || res.Outputs[1].Path != fits {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	if got := get(t, obs, res.Outputs[1].Name); string(got) != "at level\n" {
		t.Fatalf("the long path's file holds %q", got)
	}
	info, err := obs.GetInfo(ctx, res.Outputs[1].Name)
	if err != nil || info.Metadata["baton-path"] != fits {
		t.Fatalf("info %+v, %v: the path is not in the metadata", info, err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "skipped: its path is longer than 4095 bytes") || !strings.Contains(res.Error, "1 workspace entries were skipped") {
		t.Fatalf("error %q notes %q", res.Error, res.Notes)
	}
	for _, n := range res.Notes {
		if len(n) > 512 {
			t.Errorf("a note of %d bytes", len(n))
		}
	}
}

// The capture's context reaches the walk: once it ends, the capture stops
// with its error (the caller's to judge: a worker stopping hands the run
// on), not with a workspace error.
func TestCaptureStopsWithItsContext(t *testing.T) {
	obs := newStore(t)
	ws := t.TempDir()
	for i := range 50 {
		write(t, ws, fmt.Sprintf("d%d/f", i), "x\n")
	}
	for _, pol := range []outputs.Policy{{Diff: true}, {Files: []string{"**"}}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := outputs.Capture(ctx, obs, "run-ctx", ws, nil, pol)
		if !errors.Is(err, context.Canceled) || res.Error != "" || len(res.Outputs) != 0 {
			t.Fatalf("%+v: capture with its context ended: %+v, %v", pol, res, err)
		}
	}
}
