package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

func withOutputsProfile(_ *server.Options, c *config.Config) {
	c.Profiles["edit"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: time.Minute,
		Outputs: config.Outputs{Diff: true, Files: []string{"out/**"}}, Limits: config.Limits{Outputs: 1 << 20}}
}

// prune has worker.Prune remove the finished run's directory.
func (h *harness) prune(runID string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(h.stateDir, "runs", runID)
	testenv.WaitFor(h.t, 10*time.Second, "the finished marker", func() bool { _, err := os.Stat(filepath.Join(dir, "finished")); return err == nil })
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "finished"), old, old); err != nil {
		h.t.Fatal(err)
	}
	// (Once runner-outer has let go of the run, a moment after its end.)
	testenv.WaitFor(h.t, 15*time.Second, "prune to remove the run's directory", func() bool {
		pruned, err := worker.Prune(ctx, h.stateDir, time.Minute)
		return err == nil && len(pruned) == 1
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		h.t.Fatalf("run directory after prune: %v", err)
	}
}

// checkOutputs fetches every object a status lists and checks its size and
// digest, and that the bucket holds nothing else of the run.
func (h *harness) checkOutputs(runID string, st protocol.Status) map[string]string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	obs, err := h.js.ObjectStore(ctx, h.names.OutputsBucket())
	if err != nil {
		h.t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range st.Outputs {
		b, err := obs.GetBytes(ctx, o.Name)
		if err != nil {
			h.t.Fatalf("get %s: %v", o.Name, err)
		}
		sum := sha256.Sum256(b)
		if uint64(len(b)) != o.Size || "SHA-256="+base64.URLEncoding.EncodeToString(sum[:]) != o.Digest {
			h.t.Fatalf("%s: stored %d bytes, listed %+v", o.Name, len(b), o)
		}
		got[o.Name] = string(b)
	}
	list, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		h.t.Fatal(err)
	}
	n := 0
	for _, info := range list {
		if strings.HasPrefix(info.Name, runID+"/") {
			n++
		}
	}
	if n != len(st.Outputs) {
		h.t.Fatalf("the bucket holds %d objects of %s, the status lists %d", n, runID, len(st.Outputs))
	}
	return got
}

// TestOutputsCapturedAtRunEnd: an agent edits, creates and deletes files;
// the terminal status lists the diff and the chosen files, stored before
// it was published, for a run that failed as for one that succeeded.
func TestOutputsCapturedAtRunEnd(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit",
		"files": map[string]string{"README.md": "hello\nworld\n", "old.txt": "bye\n"},
		"args":  []string{"printf 'hello\\nbaton\\n' > README.md; rm old.txt; mkdir out; echo report > out/r.md; echo junk > junk.txt; exit 3"}})
	st := h.terminal(id)
	if st.Status != protocol.StatusFailed || st.OutputsError != "" {
		t.Fatalf("terminal %+v", st)
	}
	got := h.checkOutputs(id, st)
	patch := got[id+"/diff.patch"]
	for _, want := range []string{"-world\n+baton\n", "diff --git a/old.txt b/old.txt\ndeleted file mode 100644", "+++ b/junk.txt", "+++ b/out/r.md"} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	if got[outputs.FileName(id, "out/r.md")] != "report\n" || len(got) != 2 {
		t.Fatalf("outputs %v", got)
	}
	// Pruning the run's directory removes nothing from the store: the
	// outputs stay until the bucket's TTL (outputsMaxAge, its max_age).
	h.prune(id)
	pctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.checkOutputs(id, st)
	stream, err := h.js.Stream(pctx, "OBJ_"+h.names.OutputsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if cfg := stream.CachedInfo().Config; cfg.MaxAge != config.DefaultOutputsMaxAge || cfg.Replicas != 1 {
		t.Fatalf("outputs bucket max_age %v replicas %d", cfg.MaxAge, cfg.Replicas)
	}
}

// TestOutputsOverLimitLeaveStatus: past limits.outputs the status carries
// outputsError and the run's own status is unchanged.
func TestOutputsOverLimitLeaveStatus(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit",
		"args": []string{"mkdir out; head -c 3000000 /dev/zero | tr '\\0' x > out/big.txt"}})
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded || !strings.Contains(st.OutputsError, "limits.outputs") || len(st.Outputs) != 0 {
		t.Fatalf("terminal %+v", st)
	}
	h.checkOutputs(id, st)
}

// TestOutputsJobNarrows: a job drops the profile's diff and keeps only the
// files matching its own patterns too.
func TestOutputsJobNarrows(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit", "outputs": map[string]any{"diff": false, "files": []string{"**/*.md"}},
		"args": []string{"mkdir out; echo report > out/r.md; echo data > out/d.csv"}})
	st := h.terminal(id)
	if st.Status != protocol.StatusSucceeded || len(st.Outputs) != 1 || st.Outputs[0].Name != outputs.FileName(id, "out/r.md") {
		t.Fatalf("terminal %+v", st)
	}
	h.checkOutputs(id, st)
}

// endedOnce asserts the run's chain has one terminal status and was never
// handed on (no handoff, no second attach).
func (h *harness) endedOnce(runID string) protocol.Status {
	h.t.Helper()
	st := statuses(h.t, h.chain(runID, 60*time.Second))
	terminal := 0
	for _, s := range st {
		if s.Status == protocol.StatusHandoff || s.Status == protocol.StatusAttached {
			h.t.Fatalf("the run was handed on: %+v", st)
		}
		if s.Status.Terminal() {
			terminal++
		}
	}
	if terminal != 1 {
		h.t.Fatalf("%d terminal statuses: %+v", terminal, st)
	}
	return st[len(st)-1]
}

// F4 through a worker: the agent makes a chain of 18,000 directories. The
// capture walks 256 levels, notes the rest as skipped, and the run ends
// once, at once, with outputsError (it was walked for ~8 minutes, timed
// out, handed on and walked again, for ever).
func TestOutputsDeepChainEndsRun(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit",
		"args": []string{`mkdir out && echo r > out/r.md && perl -e 'for (1..18000) { mkdir "a" or die "mkdir: $!"; chdir "a" or die "cd: $!" }'`}})
	st := h.endedOnce(id)
	if st.Status != protocol.StatusSucceeded || !strings.Contains(st.OutputsError, "1 workspace entries were skipped, deeper than 256 directories") {
		t.Fatalf("terminal %+v", st)
	}
	if got := h.checkOutputs(id, st); got[outputs.FileName(id, "out/r.md")] != "r\n" || !strings.Contains(got[id+"/diff.patch"], "+++ b/out/r.md") {
		t.Fatalf("outputs %v", st.Outputs)
	}
	if !strings.Contains(strings.Join(st.OutputsNotes, "\n"), "skipped: deeper than 256 directories") {
		t.Fatalf("notes %q", st.OutputsNotes)
	}
}

// F5 through a worker: a file at a 3,770-byte path (15 directories of 250
// bytes under out/) is stored under its path's digest, so no subject is
// longer than the server's control line. The worker's connection stays up
// (the path in the subject closed it for good: -ERR 'Maximum Control Line
// Exceeded'), the run ends with the file listed under its path, and the
// worker goes on with the next run.
func TestOutputsLongPathKeepsConnection(t *testing.T) {
	h := newHarness(t, withOutputsProfile)
	id := newRunID(t)
	h.submit(map[string]any{"runId": id, "profile": "edit",
		"args": []string{`mkdir out && cd out && perl -e '$d = "d" x 250; for (1..15) { mkdir $d or die; chdir $d or die } open(F, ">f") or die; print F "deep\n"'`}})
	st := h.endedOnce(id)
	rel := "out/" + strings.Repeat(strings.Repeat("d", 250)+"/", 15) + "f"
	var file protocol.Output
	for _, o := range st.Outputs {
		if o.Path != "" {
			file = o
		}
	}
	if st.Status != protocol.StatusSucceeded || st.OutputsError != "" || file.Path != rel || file.Name != outputs.FileName(id, rel) {
		t.Fatalf("terminal %+v", st)
	}
	if got := h.checkOutputs(id, st); got[file.Name] != "deep\n" {
		t.Fatalf("outputs %v", got)
	}
	// baton outputs --get writes it under its path.
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New(h.js, h.names)
	if err != nil {
		t.Fatal(err)
	}
	if saved, err := cl.SaveOutput(ctx, id, file, dir); err != nil || saved != "files/"+rel {
		t.Fatalf("SaveOutput: %q, %v", saved, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, err := root.ReadFile("files/" + rel); err != nil || string(b) != "deep\n" {
		t.Fatalf("saved %q, %v", b, err)
	}
	next := newRunID(t)
	h.submit(map[string]any{"runId": next, "profile": "edit", "args": []string{"true"}})
	if st := h.endedOnce(next); st.Status != protocol.StatusSucceeded {
		t.Fatalf("the next run: %+v", st)
	}
}
