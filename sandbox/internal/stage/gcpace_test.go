package stage

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var gcSink []byte

// TestPacedGC: a stage runs with the forced collections off (GOGC off,
// which is what stops them) and still collects its garbage, near the
// floor while its live heap is small; with a large live heap the limit
// follows it, so collections do not come back to back. In a process of
// its own: paceGC changes the runtime for good.
func TestPacedGC(t *testing.T) {
	if os.Getenv("BATON_TEST_PACED_GC") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPacedGC$", "-test.count=1")
		cmd.Env = append(os.Environ(), "BATON_TEST_PACED_GC=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	paceGC()
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n > 8 {
		t.Fatalf("paceGC made %d heap allocations, want a few: the first limit needs no metrics read, whose table the runtime builds in every stage process", n)
	}
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d after paceGC, want off: the runtime forces a collection every two minutes", p)
	}
	collections := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumGC
	}
	n := collections()
	for range 200 {
		gcSink = make([]byte, 1<<20)
	}
	if got := collections() - n; got < 5 {
		t.Fatalf("%d collections for 200 MiB of garbage with a small live heap, want them paced on the floor", got)
	}
	live := make([][]byte, 32)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	runtime.GC() // the sentinel's finalizer paces the limit on the 32 MiB
	for deadline := time.Now().Add(5 * time.Second); debug.SetMemoryLimit(-1) < 64<<20; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("memory limit %d with 32 MiB live, want at least twice that", debug.SetMemoryLimit(-1))
		}
	}
	n = collections()
	for range 200 {
		gcSink = make([]byte, 1<<20)
	}
	if got := collections() - n; got > 40 {
		t.Errorf("%d collections for 200 MiB of garbage beside 32 MiB live: the limit does not follow the live heap", got)
	}
	runtime.KeepAlive(live)
}
