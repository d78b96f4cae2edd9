package worker_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// entry is one entry of a test archive: a file (mode 0 is 0644), or a
// link when link is set.
type entry struct {
	name, body, link string
	mode             int64
}

// writeArchive writes a gzipped tar of ents to w.
func writeArchive(w io.Writer, ents ...entry) error {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err := writeTar(zw, ents...); err != nil {
		return err
	}
	return zw.Close()
}

// writeTar writes a tar of ents to w.
func writeTar(w io.Writer, ents ...entry) error {
	tw := tar.NewWriter(w)
	for _, e := range ents {
		hdr := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Now()}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if e.link != "" {
			hdr.Typeflag, hdr.Linkname, hdr.Size, hdr.Mode = tar.TypeSymlink, e.link, 0, 0o777
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// putWorkspace uploads an archive as a client would and returns its name.
func (h *harness) putWorkspace(r io.Reader) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.New(h.js, h.names)
	if err != nil {
		h.t.Fatal(err)
	}
	name, err := cl.PutWorkspace(ctx, r)
	if err != nil {
		h.t.Fatalf("put workspace: %v", err)
	}
	return name
}

func (h *harness) putArchive(ents ...entry) string {
	h.t.Helper()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(pw, ents...)) }()
	return h.putWorkspace(pr)
}

// TestSeededRunDiffShowsOnlyTheAgentsChanges: a run seeded from an archive
// and files (which win over the archive's) sees them, can change them (a
// root worker's are the sandbox uid's), and its diff holds only what the
// agent changed.
func TestSeededRunDiffShowsOnlyTheAgentsChanges(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	repo := h.putArchive(
		entry{name: "README.md", body: "from the archive\n"},
		entry{name: "src/main.go", body: "package main\n\nfunc main() {}\n"},
		entry{name: "docs/keep.md", body: "unchanged\n"},
		entry{name: "old.txt", body: "to be deleted\n"},
		entry{name: "run.sh", body: "#!/bin/sh\necho hi\n", mode: 0o4755},
		entry{name: "latest", link: "src/main.go"},
	)
	id := newRunID(t)
	// It waits for the test's "go" (so the seeded files are looked at on
	// the host while it runs: a finished run's workspace is given back).
	script := `set -e
while [ ! -e go ]; do sleep 0.1; done 2>/dev/null; rm go
test "$(cat README.md)" = "from the files"
test "$(cat docs/keep.md)" = unchanged
test -x run.sh && test ! -u run.sh
test "$(readlink latest)" = src/main.go
printf 'package main\n\n// edited\nfunc main() {}\n' > src/main.go
rm old.txt
echo new > new.txt`
	h.submit(map[string]any{"runId": id, "profile": "edit", "workspace": map[string]string{"object": repo},
		"files": map[string]string{"README.md": "from the files\n", "config.yml": "a: 1\n"}, "args": []string{script}})
	h.waitStatus(id, protocol.StatusStarted)
	dir := filepath.Join(h.stateDir, "runs", id)
	if os.Geteuid() == 0 {
		fi, err := os.Lstat(filepath.Join(journal.Dir(dir).Workspace(), "docs", "keep.md"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != h.cfg.SandboxUID {
			t.Errorf("a seeded file is uid %d's, not the sandbox uid %d's", uid, h.cfg.SandboxUID)
		}
	}
	if err := os.WriteFile(filepath.Join(journal.Dir(dir).Workspace(), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded || st.OutputsError != "" {
		t.Fatalf("terminal %+v", st)
	}
	patch := h.checkOutputs(id, st)[id+"/diff.patch"]
	for _, want := range []string{"+// edited\n", "diff --git a/old.txt b/old.txt\ndeleted file mode 100644", "+++ b/new.txt"} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	for _, seeded := range []string{"README.md", "docs/keep.md", "run.sh", "latest", "config.yml"} {
		if strings.Contains(patch, seeded) {
			t.Errorf("patch shows the seeded, unchanged %s:\n%s", seeded, patch)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "baseline")); !os.IsNotExist(err) {
		t.Errorf("the diff's baseline was left in the run directory: %v", err)
	}
	// Pruning the run removes nothing from the workspaces stream, whose
	// archives stay until its max age (workspacesMaxAge).
	h.prune(id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := h.js.Stream(ctx, h.names.WorkspacesStream())
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := protocol.WorkspaceDigest(repo)
	if _, err := stream.GetLastMsgForSubject(ctx, h.names.WorkspaceSizeSubject(digest)); err != nil {
		t.Fatalf("the archive after prune: %v", err)
	}
	if cfg := stream.CachedInfo().Config; cfg.MaxAge != config.DefaultWorkspacesMaxAge {
		t.Fatalf("workspaces stream max_age %v", cfg.MaxAge)
	}
}

// TestSeedArchiveRejected: an archive that is missing or over
// maxWorkspaceBytes is known before the run exists: the job goes to the
// DLQ with the reason, and no run starts.
func TestSeedArchiveRejected(t *testing.T) {
	h := newHarness(t, withOutputsProfile, withConfig(func(c *config.Config) { c.MaxWorkspaceBytes = 4096 }))
	big := h.putArchive(entry{name: "noise", body: randomText(64 << 10)})
	missing, bigRun := newRunID(t), newRunID(t)
	h.submit(map[string]any{"runId": missing, "profile": "edit", "workspace": map[string]string{"object": "nope.tar.gz"}, "args": []string{"true"}})
	entries := h.waitDLQ(1, 20*time.Second)
	h.submit(map[string]any{"runId": bigRun, "profile": "edit", "workspace": map[string]string{"object": big}, "args": []string{"true"}})
	entries = h.waitDLQ(2, 20*time.Second)
	for i, want := range []struct{ reason, msg string }{
		{string(protocol.ReasonInvalid), `workspace archive "nope.tar.gz" is not in the bucket BATON_WORKSPACES`},
		{string(protocol.ReasonOversize), `more than maxWorkspaceBytes (4096)`},
	} {
		e := entries[i]
		if e.Header.Get(protocol.HeaderReason) != want.reason || !strings.Contains(e.Header.Get(protocol.HeaderError), want.msg) {
			t.Errorf("DLQ entry %d: reason %q error %q; want %q with %q", i, e.Header.Get(protocol.HeaderReason), e.Header.Get(protocol.HeaderError), want.reason, want.msg)
		}
	}
	for _, id := range []string{missing, bigRun} {
		if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", id)); !os.IsNotExist(err) {
			t.Errorf("run %s has a directory: %v", id, err)
		}
	}
}

// TestSeedBadArchiveFailsRun: an archive that turns out bad while it is
// extracted (an unsafe entry, a corrupt stream) fails the run before its
// agent starts, with the reason, and leaves no workspace behind.
func TestSeedBadArchiveFailsRun(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	slip := h.putArchive(entry{name: "ok.txt", body: "fine"}, entry{name: "l", link: "."}, entry{name: "l/x", body: "through the link"})
	garbage := h.putWorkspace(strings.NewReader("\x1f\x8b\x08\x00garbage that is not gzip"))
	// F9: 169 bytes, one name of 12,001 bytes (6,001 levels) took 182 s.
	deep := h.putArchive(entry{name: strings.Repeat("a/", 6000) + "a", body: "x"})
	for _, tc := range []struct{ object, want string }{
		{slip, `the workspace was not seeded: workspace archive "` + slip + `": unsafe archive: "l/x" goes through the link "l"`},
		{garbage, `the workspace was not seeded: workspace archive "` + garbage + `": corrupt archive`},
		{deep, `the workspace was not seeded: workspace archive "` + deep + `": archive over a limit: the name "a/a/a/`},
	} {
		id := newRunID(t)
		h.submit(map[string]any{"runId": id, "profile": "edit", "workspace": map[string]string{"object": tc.object},
			"args": []string{"echo '{\"agent\":\"ran\"}'"}})
		msgs := h.chain(id, 60*time.Second)
		sts := statuses(t, msgs)
		if len(msgs) != 1 || len(sts) != 1 || sts[0].Status != protocol.StatusFailed || !strings.Contains(sts[0].Reason, tc.want) {
			t.Fatalf("%s: chain of %d messages, statuses %+v; want one failed status with %q", tc.object, len(msgs), sts, tc.want)
		}
		if _, err := os.Lstat(journal.Dir(filepath.Join(h.stateDir, "runs", id)).Agent()); !os.IsNotExist(err) {
			t.Errorf("%s: the half-extracted workspace is still there: %v", tc.object, err)
		}
	}
}

// TestSeedFilesTooDeep is F9's variant: a job's own files, 64 paths of
// 1,024 bytes 510 levels deep, took 131 s from job to end. Paths deeper
// than an archive's names may be are the job's fault: it goes to the DLQ
// with the reason, and no run starts.
func TestSeedFilesTooDeep(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	files := map[string]string{}
	for i := range 64 {
		p := fmt.Sprintf("%02d/%s", i, strings.Repeat("a/", 508))
		files[p+strings.Repeat("f", 1024-len(p))] = "x"
	}
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit", "files": files, "args": []string{"true"}})
	e := h.waitDLQ(1, 20*time.Second)[0]
	if e.Header.Get(protocol.HeaderReason) != string(protocol.ReasonInvalid) || !strings.Contains(e.Header.Get(protocol.HeaderError), "path is 510 levels deep, limit 256") {
		t.Errorf("DLQ entry: reason %q error %q", e.Header.Get(protocol.HeaderReason), e.Header.Get(protocol.HeaderError))
	}
	if _, err := os.Lstat(filepath.Join(h.stateDir, "runs", id)); !os.IsNotExist(err) {
		t.Errorf("run %s has a directory: %v", id, err)
	}
}

// TestSeed200MiBRepository seeds a run from a 200 MiB repository tarball
// (4,000 text files of 51 KiB), checks the agent sees it, and that the
// diff at the end, against the archive read again from the store, holds
// only the agent's one change. It logs the upload, extraction and
// capture times. Under the race detector, whose gzip is several times
// slower, the tarball is not gzipped.
func TestSeed200MiBRepository(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("a 200 MiB workspace needs a root worker's disk limit (a filesystem per run): run as root")
	}
	h := newHarness(t, func(_ *server.Options, c *config.Config) {
		c.Profiles["repo"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: 5 * time.Minute,
			Outputs: config.Outputs{Diff: true}, Limits: config.Limits{Disk: 512 << 20, Outputs: 1 << 20}}
	})
	const dirs, perDir, size = 40, 100, 200 << 20 / 4000
	ents := make([]entry, 0, dirs*perDir)
	for d := range dirs {
		for f := range perDir {
			ents = append(ents, entry{name: fmt.Sprintf("pkg%02d/file%03d.go", d, f), body: sourceFile(d, f, size)})
		}
	}
	write, kind := writeArchive, "gzipped"
	if worker.RaceEnabled {
		write, kind = writeTar, "plain (race detector)"
	}
	start := time.Now()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw, ents...)) }()
	repo := h.putWorkspace(pr)
	t.Logf("uploaded a %.1f MiB tarball, %s, in %v", float64(dirs*perDir*size)/(1<<20), kind, time.Since(start))

	id := newRunID(t)
	submitted := time.Now()
	h.submit(map[string]any{"runId": id, "profile": "repo", "workspace": map[string]string{"object": repo},
		"args": []string{`set -e; test "$(ls pkg*/*.go | wc -l)" = 4000; test "$(cat pkg*/*.go | wc -c)" = 209712000; echo '// agent' >> pkg07/file042.go`}})
	sts := statuses(t, h.chain(id, 3*time.Minute))
	ended := time.Now() // the terminal status is published once the capture is stored
	started, st := sts[0], sts[len(sts)-1]
	if started.Status != protocol.StatusStarted || st.Status != protocol.StatusSucceeded || st.OutputsError != "" {
		t.Fatalf("statuses %+v", sts)
	}
	t.Logf("submit to started (the archive extracted: 200 MiB, 4,000 files) %v; started to the terminal status read (the agent, then the baseline extracted again, the diff, the status) %v",
		started.Time.Sub(submitted).Round(time.Millisecond), ended.Sub(started.Time).Round(time.Millisecond))
	patch := h.checkOutputs(id, st)[id+"/diff.patch"]
	if strings.Count(patch, "diff --git") != 1 || !strings.Contains(patch, "+// agent\n") || !strings.Contains(patch, "a/pkg07/file042.go") {
		t.Fatalf("patch is not the agent's one change (status %+v):\n%.2000s", st, patch)
	}
}

// sourceFile is a file of n bytes of source-like text, different per
// file, ending with a newline.
func sourceFile(d, f, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "func f%d_%d_%d(x int) int { return x*%d + %d } // package %d\n", d, f, i, i, d*f, d)
	}
	return b.String()[:n-1] + "\n"
}

// randomText is n bytes gzip cannot shrink much.
func randomText(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

// TestSeedArchiveGoneBeforeCapture: an archive deleted while its run goes
// on (expired, say) costs the run its diff, with the reason, and not its
// files.
func TestSeedArchiveGoneBeforeCapture(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	archive := h.putArchive(entry{name: "README.md", body: "hi\n"})
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit", "workspace": map[string]string{"object": archive},
		"args": []string{"while [ ! -e go ]; do sleep 0.1; done 2>/dev/null; mkdir out; echo r > out/r.md"}})
	h.waitStatus(id, protocol.StatusStarted)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Nothing deletes one archive of the stream (it denies deletes): an
	// operator deletes the stream, which the next worker makes again.
	if err := h.js.DeleteStream(ctx, h.names.WorkspacesStream()); err != nil {
		t.Fatal(err)
	}
	// The agent goes on once the archive is gone.
	if err := os.WriteFile(filepath.Join(journal.Dir(filepath.Join(h.stateDir, "runs", id)).Workspace(), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded || !strings.Contains(st.OutputsError, `no diff: its baseline: workspace archive "`+archive+`"`) {
		t.Fatalf("terminal %+v", st)
	}
	if got := h.checkOutputs(id, st); len(got) != 1 || got[outputs.FileName(id, "out/r.md")] != "r\n" {
		t.Fatalf("outputs %v; want the file alone", got)
	}
}

// TestSeedSquattedArchiveFailsRun: bytes published under an archive's
// digest before its owner uploads it (same length, other content; or a
// chunk of the wrong length) fail the run before its agent starts, with
// the reason, and leave no workspace; the owner's upload then finds the
// digest taken and stores nothing.
func TestSeedSquattedArchiveFailsRun(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	var real, decoy bytes.Buffer
	if err := writeTar(&real, entry{name: "ok.txt", body: "the owner's"}); err != nil {
		t.Fatal(err)
	}
	if err := writeTar(&decoy, entry{name: "ok.txt", body: "a squatter!"}); err != nil {
		t.Fatal(err)
	}
	if real.Len() != decoy.Len() {
		t.Fatalf("the decoy is %d bytes, the archive %d", decoy.Len(), real.Len())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	squat := func(content []byte, chunk []byte) string {
		t.Helper()
		name := protocol.WorkspaceObjectName(sha256.Sum256(content), false)
		digest, _ := protocol.WorkspaceDigest(name)
		for _, m := range []*nats.Msg{
			{Subject: h.names.WorkspaceChunkSubject(digest, 0), Data: chunk},
			{Subject: h.names.WorkspaceSizeSubject(digest), Data: []byte(strconv.Itoa(len(content)))},
		} {
			if _, err := h.js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	squatted := squat(real.Bytes(), decoy.Bytes())
	short := squat(append(real.Bytes(), 'x'), real.Bytes())
	if again := h.putWorkspace(bytes.NewReader(real.Bytes())); again != squatted {
		t.Fatalf("the owner's upload named %q, not %q", again, squatted)
	}
	for _, tc := range []struct{ object, want string }{
		{squatted, `the workspace was not seeded: workspace archive "` + squatted + `": its digest is `},
		{short, `the workspace was not seeded: workspace archive "` + short + `": corrupt archive: tar: bad chunk: chunk 0 of 1 is 2048 bytes, not 2049`},
	} {
		id := newRunID(t)
		h.submit(map[string]any{"runId": id, "profile": "edit", "workspace": map[string]string{"object": tc.object},
			"args": []string{"echo '{\"agent\":\"ran\"}'"}})
		msgs := h.chain(id, 60*time.Second)
		sts := statuses(t, msgs)
		if len(msgs) != 1 || len(sts) != 1 || sts[0].Status != protocol.StatusFailed || !strings.Contains(sts[0].Reason, tc.want) ||
			(tc.object == squatted && !strings.Contains(sts[0].Reason, "uploaded with other content")) {
			t.Fatalf("%s: chain of %d messages, statuses %+v; want one failed status with %q", tc.object, len(msgs), sts, tc.want)
		}
		if _, err := os.Lstat(journal.Dir(filepath.Join(h.stateDir, "runs", id)).Agent()); !os.IsNotExist(err) {
			t.Errorf("%s: the half-extracted workspace is still there: %v", tc.object, err)
		}
	}
}
