package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckStateDir: a state dir under a directory the sandbox uid cannot
// search is a warning naming that directory, for a root worker; made
// searchable, it passes. A state dir not made yet is judged by what is
// above it.
func TestCheckStateDir(t *testing.T) {
	base := filepath.Join(t.TempDir(), "priv")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(base); p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	o := DoctorOptions{SandboxUID: 65534, StateDir: filepath.Join(base, "not", "yet", "state")}
	c := checkStateDir(o, 0)
	if c.Severity != SevWarn || !strings.Contains(c.Detail, base+" (mode 0700") || !strings.Contains(c.Fix, "chmod o+x "+base) {
		t.Fatalf("under a 0700 directory: %+v", c)
	}
	if c := checkStateDir(o, 1000); c.Severity != SevOK {
		t.Fatalf("a non-root worker: %+v", c)
	}
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if c := checkStateDir(o, 0); c.Severity != SevOK {
		t.Fatalf("under searchable directories: %+v", c)
	}
	if c := checkStateDir(DoctorOptions{}, 0); c.Severity != SevOK || !strings.Contains(c.Detail, "not checked") {
		t.Fatalf("no state dir: %+v", c)
	}
}
