package client_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

// captured stores a workspace's outputs for run as a worker does and
// publishes its terminal status listing them.
func captured(t *testing.T, e env, run string, files map[string]string, links map[string]string) protocol.Status {
	t.Helper()
	ws := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for rel, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, rel)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := outputs.Capture(ctxT(t), e.res.Outputs, run, ws, nil, outputs.Policy{Diff: true, Files: []string{"**"}})
	if err != nil || res.Error != "" {
		t.Fatalf("capture: %v %q", err, res.Error)
	}
	code := 0
	st := protocol.Status{Status: protocol.StatusSucceeded, RunID: run, ExitCode: &code, Outputs: res.Outputs, OutputsNotes: res.Notes}
	publish(t, e.js, run, chainMsg{kind: protocol.KindStatus, data: string(st.Marshal())})
	return st
}

func TestOutputsListAndSave(t *testing.T) {
	e := setup(t)
	if _, err := e.c.Outputs(ctxT(t), "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	publish(t, e.js, "going", chainMsg{kind: protocol.KindStatus, data: status("going", protocol.StatusStarted, 0)})
	if _, err := e.c.Outputs(ctxT(t), "going"); !errors.Is(err, client.ErrNotEnded) {
		t.Fatalf("unfinished run: %v", err)
	}
	// A run just started has its record and no status yet: not ended, where
	// it was said not to exist.
	if _, err := kv.NewStore[kv.RunRecord](e.res.Runs).Create(ctxT(t), "starting", kv.RunRecord{RunID: "starting", State: kv.RunStarting}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Outputs(ctxT(t), "starting"); !errors.Is(err, client.ErrNotEnded) || !strings.Contains(err.Error(), "starting is starting; its outputs are captured when it ends") {
		t.Fatalf("run with a record and no status: %v, want not ended", err)
	}
	st := captured(t, e, "r1", map[string]string{"out/a.txt": "A\n", "odd\nname": "odd"}, map[string]string{"ln": "/etc/passwd"})
	ro, err := e.c.Outputs(ctxT(t), "r1")
	if err != nil || len(ro.Outputs) != 4 || ro.Status != protocol.StatusSucceeded {
		t.Fatalf("Outputs: %+v, %v", ro, err)
	}
	dir := t.TempDir()
	for _, o := range st.Outputs {
		if _, err := e.c.SaveOutput(ctxT(t), "r1", o, dir); err != nil {
			t.Fatalf("save %s: %v", o.Name, err)
		}
	}
	for rel, want := range map[string]string{"files/out/a.txt": "A\n", "files/odd\nname": "odd"} {
		if got, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", rel, got, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "files/ln")); err != nil || target != "/etc/passwd" {
		t.Errorf("link saved as %q, %v", target, err)
	}
	if patch, err := os.ReadFile(filepath.Join(dir, "diff.patch")); err != nil || !bytes.Contains(patch, []byte("+++ b/out/a.txt")) {
		t.Errorf("diff.patch: %q, %v", patch, err)
	}
}

// An object that is not what the status lists is never written.
func TestSaveOutputChecksDigest(t *testing.T) {
	e := setup(t)
	st := captured(t, e, "r2", map[string]string{"report.md": "good"}, nil)
	var report protocol.Output
	for _, o := range st.Outputs {
		if o.Name == outputs.FileName("r2", "report.md") {
			report = o
		}
	}
	if _, err := e.res.Outputs.PutString(ctxT(t), report.Name, "evil"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := e.c.SaveOutput(ctxT(t), "r2", report, dir); !errors.Is(err, client.ErrDigest) {
		t.Fatalf("tampered output: %v, want ErrDigest", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "files")); len(ents) != 0 {
		t.Fatalf("a tampered output left %v behind", ents)
	}
	// A name that would leave the directory is refused.
	bad := protocol.Output{Name: "r2/files/..%2F..%2Fescape", Size: 1, Digest: "x"}
	if _, err := e.c.SaveOutput(ctxT(t), "r2", bad, dir); !errors.Is(err, outputs.ErrBadName) {
		t.Fatalf("escaping name: %v", err)
	}
	// So is a path that would leave it, under its own digest.
	bad = protocol.Output{Name: outputs.FileName("r2", "../../escape"), Path: "../../escape", Size: 1, Digest: "x"}
	if _, err := e.c.SaveOutput(ctxT(t), "r2", bad, dir); !errors.Is(err, outputs.ErrBadName) {
		t.Fatalf("escaping path: %v", err)
	}
}
