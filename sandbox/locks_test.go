package sandbox

import (
	"slices"
	"strings"
	"testing"
)

func TestFlockHolders(t *testing.T) {
	const locks = `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 08:01:5678 0 EOF
2: POSIX  ADVISORY  WRITE 4321 08:01:5678 0 EOF
3: FLOCK  ADVISORY  WRITE 77 00:2c:15678 0 EOF
4: OFDLCK ADVISORY  READ  -1 08:01:5678 0 EOF
5: FLOCK  ADVISORY  WRITE 55 00:2f:5678 0 EOF
6: FLOCK  ADVISORY  WRITE -1 08:01:5678 0 EOF
short line
`
	got, err := flockHolders(strings.NewReader(locks), 5678)
	if err != nil || !slices.Equal(got, []int{1234, 55}) {
		t.Fatalf("flockHolders = %v, %v; want [1234 55]", got, err)
	}
	if got, err := flockHolders(strings.NewReader(locks), 1); err != nil || len(got) != 0 {
		t.Fatalf("flockHolders of an unlocked inode = %v, %v", got, err)
	}
	if _, err := flockHolders(strings.NewReader("1: FLOCK ADVISORY WRITE x 08:01:5678 0 EOF\n"), 5678); err == nil {
		t.Fatal("a garbled pid passed")
	}
}

func FuzzFlockHolders(f *testing.F) {
	f.Add("1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF\n", uint64(5678))
	f.Fuzz(func(t *testing.T, s string, ino uint64) {
		pids, err := flockHolders(strings.NewReader(s), ino)
		for _, p := range pids {
			if err == nil && p <= 0 {
				t.Fatalf("pid %d returned", p)
			}
		}
	})
}
