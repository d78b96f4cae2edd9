package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
// baton-runner is the chain's own binary, as workers run it; baton is the
// whole program, whose start is slower in each of the chain's four stages.
func BenchmarkStartToFirstByte(b *testing.B) {
	needSandbox(b)
	b.Run("baton-runner", func(b *testing.B) { benchStart(b, batonRunner(b)) })
	b.Run("baton", func(b *testing.B) { benchStart(b, testenv.BatonBinary(b)) })
}

// batonRunner is baton-runner beside the baton binary under test.
func batonRunner(b *testing.B) string {
	p := filepath.Join(filepath.Dir(testenv.BatonBinary(b)), "baton-runner")
	if _, err := os.Stat(p); err != nil {
		b.Fatalf("%v: build baton-runner beside baton (go build -o DIR ./cmd/baton ./cmd/baton-runner)", err)
	}
	return p
}

func benchStart(b *testing.B, bin string) {
	b.ReportMetric(p50ms(startLatencies(b, bin, nil, false)), "p50-ms")
}

// startLatencies starts an `echo hello` agent with the network allowlist
// allow once per iteration and returns each Start-to-first-byte time.
// With prestarted, each run takes a chain started before its timer
// (Prestart, then Take).
func startLatencies(b *testing.B, bin string, allow []string, prestarted bool) []time.Duration {
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		spec := newSpec(b, "echo", "hello")
		spec.Network.Allow = allow
		dir := journal.Dir(spec.RunDir)
		var p *sandbox.Prestarted
		if prestarted {
			p = prestart(b, bin, spec, "bench")
			settled(b, p)
		}
		b.StartTimer()
		began := time.Now()
		var err error
		if p != nil {
			_, err = p.Take(context.Background(), spec, nil)
		} else {
			_, err = sandbox.Start(context.Background(), spec, nil, sandbox.WithBinary(bin))
		}
		if err != nil {
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
	return lat
}

// BenchmarkSandboxStart measures a run's start in the full sandbox, from
// Start until the journal holds the first byte of an `echo` agent, for
// each network mode, against `bwrap --ro-bind / / true` (spawn to exit)
// measured in the same run, with the chain run from baton-runner. It
// reports the median (p50-ms) and its ratio to bwrap's (x-bwrap). The
// -prestarted modes time a run's Take of a chain started ahead (Prestart)
// and settled (its exec stage waiting), as in a pool filled before its jobs. The pasta mode needs /dev/net/tun open to the
// sandbox uid, which the benchmark makes so when run as root.
//
//	go test -run '^$' -bench BenchmarkSandboxStart -benchtime 40x ./sandbox
func BenchmarkSandboxStart(b *testing.B) {
	needSandbox(b)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal("the anchor needs bubblewrap: apt-get install bubblewrap")
	}
	var anchor float64
	b.Run("bwrap", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			began := time.Now()
			if out, err := testenv.Output(exec.Command(bwrap, "--ro-bind", "/", "/", "true")); err != nil {
				b.Fatalf("bwrap: %v: %s", err, out)
			}
			lat = append(lat, time.Since(began))
		}
		anchor = p50ms(lat)
		b.ReportMetric(anchor, "p50-ms")
	})
	for _, mode := range []struct {
		name       string
		allow      []string
		prestarted bool
	}{
		{"none", nil, false},
		{"proxy", []string{"api.example.com"}, false},
		{"pasta", []string{"api.example.com", "10.255.255.0/30"}, false},
		{"none-prestarted", nil, true},
		{"proxy-prestarted", []string{"api.example.com"}, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			if mode.name == "pasta" {
				needTun(b)
			}
			lat := startLatencies(b, batonRunner(b), mode.allow, mode.prestarted)
			p := p50ms(lat)
			b.ReportMetric(p, "p50-ms")
			if anchor > 0 {
				b.ReportMetric(p/anchor, "x-bwrap")
			}
		})
	}
}

func p50ms(lat []time.Duration) float64 {
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Microseconds()) / 1000
}
