package sandbox_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
)

// BenchmarkStartToFirstByte measures Start until the journal holds the
// first byte of an `echo` agent: readiness, the chain, the namespaces
// and the journal copy. It reports the median as p50-ms.
// runnertest is the package's small test binary; baton is the real one,
// whose larger program starts slower in each of the chain's three stages.
func BenchmarkStartToFirstByte(b *testing.B) {
	needSandbox(b)
	b.Run("runnertest", func(b *testing.B) { benchStart(b, runnerBinary(b)) })
	b.Run("baton", func(b *testing.B) { benchStart(b, testenv.BatonBinary(b)) })
}

func benchStart(b *testing.B, bin string) {
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		spec := newSpec(b, "echo", "hello")
		dir := journal.Dir(spec.RunDir)
		b.StartTimer()
		began := time.Now()
		if _, err := sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(bin)); err != nil {
			b.Fatal(err)
		}
		for {
			if st, err := os.Stat(dir.Journal()); err == nil && st.Size() > 0 {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(began))
		b.StopTimer()
		stdout, s := waitEnd(b, dir, spec.Nonce, 10*time.Second)
		if stdout != "hello\n" || s.Reason != journal.ReasonExit {
			b.Fatalf("run ended with %q, %+v", stdout, s)
		}
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
