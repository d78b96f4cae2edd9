package chain

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestParsePID(t *testing.T) {
	good := map[string]int{"1": 1, "123\n": 123, "4194304": 4194304}
	for in, want := range good {
		if got, err := ParsePID([]byte(in)); err != nil || got != want {
			t.Errorf("ParsePID(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "0", "-1", "+1", " 1", "1 ", "1\n\n", "4194305", "99999999999", "0x10", "1e3", "12a", "١٢"} {
		if got, err := ParsePID([]byte(in)); err == nil {
			t.Errorf("ParsePID(%q) = %d, want an error", in, got)
		}
	}
}

func FuzzParsePID(f *testing.F) {
	for _, s := range []string{"1", "123\n", "4194304", "-1", "0x1", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		pid, err := ParsePID(in)
		if err != nil {
			return
		}
		if pid <= 0 || pid > maxPID {
			t.Fatalf("accepted pid %d", pid)
		}
		if back, err := ParsePID([]byte(strconv.Itoa(pid) + "\n")); err != nil || back != pid {
			t.Fatalf("pid %d does not round trip", pid)
		}
	})
}

func TestWritePIDFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runner.pid")
	for _, pid := range []int{12345, 7} {
		if err := WritePIDFile(p, pid); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParsePID(b); err != nil || got != pid {
			t.Errorf("pid file holds %q", b)
		}
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary pid file left behind: %v", err)
	}
}
