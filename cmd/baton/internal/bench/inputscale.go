package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/protocol"
)

// inputScale: the input row under the scale row's load, on the same
// worker. The scale row's runs (sz.scaleRuns stamping agents at
// sz.scaleRate lines/s, one worker of the default lease TTL) are started
// and, once every one publishes, the input measurement runs its runs on
// that worker; then the load's runs are cancelled. profile is the load's:
// "stamp" (the scale row's, nice 0) or "stamp-batch" (the same at nice 19,
// as a batch profile would be).
func (e *env) inputScale(ctx context.Context, sz sizes, row, profile string) []Result {
	load := fmt.Sprintf("under %d runs × %.0f lines/s on the same worker (profile %s)", sz.scaleRuns, sz.scaleRate, profile)
	fail := func(err error) []Result {
		return failed(row, inputTarget+", "+load, err)
	}
	cfg := filepath.Join(e.dir, "worker-"+row+".yaml")
	if err := os.WriteFile(cfg, []byte(configWithTTL(scaleLeaseTTL)), 0o600); err != nil {
		return fail(err)
	}
	if _, err := e.startWorkerWith(ctx, row, sz.scaleRuns+10, cfg); err != nil {
		return fail(err)
	}
	var (
		mu     sync.Mutex
		up     = map[string]bool{}
		events int
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.Prefix()+".runs.*.*", func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindStatus {
			return
		}
		if _, _, ok := ParseStamp(m.data); !ok {
			return // the input runs' lines
		}
		mu.Lock()
		up[m.runID] = true
		events++
		mu.Unlock()
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	var ids []string
	began := time.Now()
	for i := range sz.scaleRuns {
		id := fmt.Sprintf("bench-%s-load-%d", row, i)
		ids = append(ids, id)
		job := protocol.Job{RunID: id, Profile: profile, Args: []string{
			"--rate", strconv.FormatFloat(sz.scaleRate, 'f', -1, 64), "--duration", sz.scaleAgentTime.String(), "--size", "200"}}
		if err := e.client.Submit(ctx, job); err != nil {
			return fail(err)
		}
	}
	defer func() {
		for _, id := range ids {
			_, _ = e.client.Cancel(ctx, id)
		}
		if _, err := e.waitRuns(ctx, term, ids, 2*time.Minute); err != nil {
			e.logf("%s: the load's runs: %v", row, err)
		}
	}()
	for {
		mu.Lock()
		n := len(up)
		mu.Unlock()
		if n == sz.scaleRuns {
			break
		}
		if time.Since(began) > sz.scaleStartWithin {
			return fail(fmt.Errorf("only %d of %d load runs published within %s", n, sz.scaleRuns, sz.scaleStartWithin))
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.logf("%s: %d load runs publishing after %s", row, sz.scaleRuns, time.Since(began).Round(time.Millisecond))
	time.Sleep(time.Second) // past the start of the last runs
	mu.Lock()
	ev0 := events
	mu.Unlock()
	t0 := time.Now()
	load0 := loadAverage()
	res := e.measureInput(ctx, sz, row, "bench-"+row, load)
	mu.Lock()
	rate := float64(events-ev0) / time.Since(t0).Seconds()
	mu.Unlock()
	for i := range res {
		res[i].Measured += fmt.Sprintf("; the load %.0f ev/s meanwhile, load average %s → %s", rate, load0, loadAverage())
	}
	return res
}
