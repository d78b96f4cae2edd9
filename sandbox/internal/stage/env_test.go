package stage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestAgentEnv(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"empty", nil, []string{"HOME=/h", "PWD=/ws"}},
		{"keeps HOME", []string{"HOME=/home/a", "X=1"}, []string{"HOME=/home/a", "X=1", "PWD=/ws"}},
		{"PWD replaced", []string{"PWD=/elsewhere", "A=b"}, []string{"PWD=/ws", "A=b", "HOME=/h"}},
		{"last wins", []string{"A=1", "B=2", "A=3"}, []string{"A=3", "B=2", "HOME=/h", "PWD=/ws"}},
		{"value with =", []string{"A=b=c"}, []string{"A=b=c", "HOME=/h", "PWD=/ws"}},
	}
	for _, c := range cases {
		if got := agentEnv(c.in, "/ws", "/h"); !slices.Equal(got, c.want) {
			t.Errorf("%s: agentEnv(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin1, bin2, ws := filepath.Join(dir, "bin1"), filepath.Join(dir, "bin2"), filepath.Join(dir, "ws")
	for _, d := range []string{bin1, bin2, ws, filepath.Join(bin1, "adir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin1, "noexec"), 0o644)
	write(filepath.Join(bin2, "noexec"), 0o755) // found after a non-executable one
	write(filepath.Join(bin2, "tool"), 0o755)
	write(filepath.Join(bin1, "only-noexec"), 0o600)
	write(filepath.Join(ws, "local"), 0o755)
	path := "PATH=" + bin1 + ":relative:" + bin2
	cases := []struct {
		file    string
		env     []string
		want    string
		wantErr error
	}{
		{"tool", []string{path}, filepath.Join(bin2, "tool"), nil},
		{"noexec", []string{path}, filepath.Join(bin2, "noexec"), nil},
		{"only-noexec", []string{path}, "", errNotExecutable},
		{"adir", []string{path}, "", errNotExecutable},
		{"missing", []string{path}, "", errNotFound},
		{"local", []string{"PATH=" + bin1}, "", errNotFound}, // the workspace is never searched
		{"local", []string{"PATH=:."}, "", errNotFound},
		{"./local", []string{path}, filepath.Join(ws, "local"), nil},
		{filepath.Join(bin2, "tool"), nil, filepath.Join(bin2, "tool"), nil},
		{filepath.Join(bin1, "noexec"), nil, "", errNotExecutable},
		{"/no/such/file", nil, "", errNotFound},
		{"sh", nil, "/usr/bin/sh", nil}, // default PATH
	}
	for _, c := range cases {
		got, err := lookPath(c.file, c.env, ws)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("lookPath(%q, %q) = %q, %v, want %v", c.file, c.env, got, err, c.wantErr)
			}
			continue
		}
		if c.file == "sh" {
			// /bin may be a symlink to /usr/bin or not: either is fine.
			if err != nil || filepath.Base(got) != "sh" {
				t.Errorf("lookPath(sh) with the default PATH = %q, %v", got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("lookPath(%q, %q) = %q, %v, want %q", c.file, c.env, got, err, c.want)
		}
	}
}

func TestStartExitCode(t *testing.T) {
	cases := map[error]int{
		errNotFound:      127,
		syscall.ENOENT:   127,
		errNotExecutable: 126,
		syscall.EACCES:   126,
		syscall.ENOEXEC:  126,
	}
	for err, want := range cases {
		if got := startExitCode(err); got != want {
			t.Errorf("startExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestRedactEnv(t *testing.T) {
	got := redactEnv([]string{"PATH=/bin", "API_KEY=secret", "LC_ALL=C", "HOME=/h", "TOKEN="})
	want := []string{"PATH=/bin", "API_KEY=<redacted>", "LC_ALL=C", "HOME=/h", "TOKEN=<redacted>"}
	if !slices.Equal(got, want) {
		t.Errorf("redactEnv = %q, want %q", got, want)
	}
	if strings.Contains(strings.Join(got, " "), "secret") {
		t.Error("a secret survived")
	}
}
