package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/outputs"
)

var outputsTarget = "ratio ≤ 1.5: capture (diff + store) of a workspace vs an object put of the same bytes"

// outputsRow: the capture of a workspace of sz.outputsBytes of new text
// files (walk, diff, store) against a plain Object Store put of the diff it
// produced, on the same server; medians of sz.outputsReps, alternated.
func (e *env) outputs(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("outputs", outputsTarget, err) }
	ws, err := os.MkdirTemp(e.dir, "outputs-ws-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(ws)
	line := strings.Repeat("the agent wrote this line of a source file; ", 2) + "\n"
	const fileBytes = 1 << 20
	content := []byte(strings.Repeat(line, fileBytes/len(line)))
	for i := range int(sz.outputsBytes / fileBytes) {
		p := filepath.Join(ws, fmt.Sprintf("src/pkg%02d/file%03d.go", i%10, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return fail(err)
		}
	}
	nc, err := nats.Connect(e.srv.ClientURL(), nats.Name("baton-bench-outputs"))
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "BENCH_OUTPUTS", Storage: jetstream.FileStorage})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = js.DeleteObjectStore(context.WithoutCancel(ctx), "BENCH_OUTPUTS") }()
	pol := outputs.Policy{Diff: true, MaxBytes: 2 * sz.outputsBytes}
	capture := func(i int) (time.Duration, uint64, error) {
		start := time.Now()
		res, err := outputs.Capture(ctx, obs, fmt.Sprintf("bench-%d", i), ws, nil, pol)
		if err == nil && res.Error != "" {
			err = fmt.Errorf("capture: %s", res.Error)
		}
		if err != nil {
			return 0, 0, err
		}
		return time.Since(start), res.Outputs[0].Size, nil
	}
	// The patch the capture stores, as a file for the anchor's put.
	if _, _, err := capture(-1); err != nil {
		return fail(err)
	}
	patch := filepath.Join(e.dir, "outputs-bench.patch")
	if err := obs.GetFile(ctx, outputs.DiffName("bench--1"), patch); err != nil {
		return fail(err)
	}
	defer os.Remove(patch)
	put := func(i int) (time.Duration, error) {
		f, err := os.Open(patch)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		start := time.Now()
		_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: fmt.Sprintf("anchor-%d", i)}, f)
		return time.Since(start), err
	}
	var caps, puts []time.Duration
	var size uint64
	for i := range sz.outputsReps {
		c, n, err := capture(i)
		if err != nil {
			return fail(err)
		}
		p, err := put(i)
		if err != nil {
			return fail(err)
		}
		caps, puts, size = append(caps, c), append(puts, p), n
	}
	mc, mp := median(caps), median(puts)
	ratio := float64(mc) / float64(mp)
	return []Result{{
		Row: "outputs", Target: outputsTarget,
		Measured: fmt.Sprintf("%d MiB workspace (%d files) → %.1f MiB diff: capture %s, put %s (×%.2f); medians of %d",
			sz.outputsBytes>>20, sz.outputsBytes/fileBytes, float64(size)/(1<<20), ms(mc), ms(mp), ratio, sz.outputsReps),
		Pass: verdict(ratio <= 1.5),
	}}
}
