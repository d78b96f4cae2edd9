package bench_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/bench"
	"github.com/batonhq/baton/internal/testenv"
)

// TestQuickSuite runs every row of the suite, small, against the real
// binary: each must measure something (its figures are not asserted: they
// are the benchmark's to judge, on a quiet machine). BATON_BENCH=full runs
// the whole benchmark instead and prints its table.
func TestQuickSuite(t *testing.T) {
	full := os.Getenv("BATON_BENCH") == "full"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, bench.Config{Binary: testenv.BatonBinary(t), Quick: !full, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	if err := rep.Print(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	rows := map[string]bool{}
	for _, r := range rep.Results {
		rows[r.Row] = true
		if strings.HasPrefix(r.Measured, "error:") || r.Pass == "" {
			t.Errorf("row %s could not be measured: %s\n%s", r.Row, r.Measured, progress.String())
		}
	}
	for _, want := range []string{"pipeline", "pipeline-20", "latency", "start", "start, pasta", "hand-off", "crash", "scale", "history", "outputs", "sessions", "fairness", "fairness, backlog"} {
		if !rows[want] {
			t.Errorf("no %s row in the report", want)
		}
	}
}
