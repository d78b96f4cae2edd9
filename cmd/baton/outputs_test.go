package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

func TestOutputNamed(t *testing.T) {
	file := protocol.Output{Name: outputs.FileName("r", "out/a.md"), Path: "out/a.md"}
	odd := protocol.Output{Name: outputs.FileName("r", "odd\nname"), Path: outputs.EscapePath("odd\nname")}
	nested := protocol.Output{Name: outputs.FileName("r", "files/x"), Path: "files/x"}
	diff := protocol.Output{Name: outputs.DiffName("r")}
	for _, tc := range []struct {
		get  string
		o    protocol.Output
		want bool
	}{
		{"diff.patch", diff, true},
		{"r/diff.patch", diff, true},
		{"files/diff.patch", diff, false},
		{"out/a.md", file, true},
		{"files/out/a.md", file, true},
		{file.Name, file, true},
		{strings.TrimPrefix(file.Name, "r/"), file, true},
		{"a.md", file, false},
		{"out/a.md/", file, false},
		{"files/files/out/a.md", file, false},
		{"odd%0Aname", odd, true}, // as listed
		{"files/odd%0Aname", odd, true},
		{"odd\nname", odd, true}, // as its bytes
		{"files/x", nested, true},
		{"files/files/x", nested, true},
		{"x", nested, false},
		{"out/a.md", protocol.Output{Name: "r/files/forged", Path: "out/a.md"}, false}, // a name not its path's
		{"", file, false},
	} {
		if got := outputNamed("r", tc.get, tc.o); got != tc.want {
			t.Errorf("outputNamed(%q, %q) = %v, want %v", tc.get, tc.o.Name, got, tc.want)
		}
	}
}

// TestCLIOutputs: --get NAME -o - prints the output, named with or without
// files/; a run that captured nothing says so.
func TestCLIOutputs(t *testing.T) {
	e := newCLIEnv(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "out", "report.md"), []byte("# Report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := outputs.Capture(t.Context(), e.res.Outputs, "o-1", ws, nil, outputs.Policy{Diff: true, Files: []string{"**"}})
	if err != nil || res.Error != "" || len(res.Outputs) != 2 {
		t.Fatalf("capture: %+v, %v", res, err)
	}
	code := 0
	ended := func(run string, outs []protocol.Output) string {
		st := protocol.Status{Status: protocol.StatusSucceeded, RunID: run, Worker: "w1", Epoch: 1, ExitCode: &code, Outputs: outs}
		return string(st.Marshal())
	}
	e.chain("o-1", [3]string{"status", ended("o-1", res.Outputs), ""})
	e.chain("o-none", [3]string{"status", ended("o-none", nil), ""})

	for _, get := range []string{"out/report.md", "files/out/report.md"} {
		if out, errOut, err := e.run("", "outputs", "o-1", "--get", get, "-o", "-"); err != nil || out != "# Report\n" {
			t.Errorf("outputs --get %s -o -: %v, stdout %q, stderr %q", get, err, out, errOut)
		}
	}
	if out, _, err := e.run("", "outputs", "o-1", "--get", "diff.patch", "-o", "-"); err != nil || !strings.Contains(out, "+# Report") {
		t.Errorf("outputs --get diff.patch -o -: %v, %q", err, out)
	}
	if _, _, err := e.run("", "outputs", "o-1", "--get", "all", "-o", "-"); err == nil || !strings.Contains(err.Error(), "writes one output") {
		t.Errorf("outputs --get all -o -: %v", err)
	}
	if out, _, err := e.run("", "outputs", "o-1"); err != nil || !strings.HasPrefix(out, "NAME") || !strings.Contains(out, " out/report.md ") {
		t.Errorf("outputs listing: %v\n%s", err, out)
	}
	if out, _, err := e.run("", "outputs", "o-none"); err != nil || out != "run o-none has no outputs\n" {
		t.Errorf("outputs of a run that captured nothing: %v, %q", err, out)
	}
	if _, _, err := e.run("", "outputs", "o-none", "--get", "diff.patch"); err == nil || err.Error() != "run o-none has no outputs" {
		t.Errorf("outputs --get of a run that captured nothing: %v", err)
	}
}
