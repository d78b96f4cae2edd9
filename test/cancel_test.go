package test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/test/internal/e2e"
)

// massCancelWithin is how long every run of a mass cancel has to end
// `cancelled`, from the first cancel request.
const massCancelWithin = 30 * time.Second

// runnersGoneWithin is how long the runners of a mass cancel have, after
// every run's terminal status, to exit: a runner writes its sentinel (the
// status follows it) and then exits, which hundreds of runners exiting at
// once on a loaded 2-core machine can delay by seconds; a runner the
// cancel missed lives on for hours.
const runnersGoneWithin = 15 * time.Second

// TestMassCancel: a pool's runs cancelled all at once each end
// `cancelled`, none lost. A cancel is lost when the worker takes it for
// delivered (or for a runner already gone) while the runner lives: a
// /proc/locks read that skipped the holder while hundreds of other runners
// dropped their locks did that once, and so would a cancel that the
// runner could not take yet and that waited for the next check of the
// record. 100 runs, once; BATON_SOAK=1: 500 runs, ten times in a row.
func TestMassCancel(t *testing.T) {
	runs, rounds := 100, 1
	if os.Getenv("BATON_SOAK") != "" {
		runs, rounds = 500, 10
	}
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`concurrency: %d
diskBudget: false
profiles:
  idle:
    command: ["sleep", "7200"]
    timeout: 3h
    network: none
`, runs+10)), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := e2e.StartWorker(t, bin, s.ClientURL(), dir, "mass", "--config", cfg)
	nc, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	c, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		started = map[string]bool{}
		ended   = map[string]protocol.Status{}
	)
	sub, err := nc.Subscribe(names.Prefix()+".runs.*.status", func(m *nats.Msg) {
		st, err := protocol.ParseStatus(m.Data)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case st.Status == protocol.StatusStarted:
			started[st.RunID] = true
		case st.Status.Terminal():
			ended[st.RunID] = st
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	count := func(ids []string) (up, down int) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if started[id] {
				up++
			}
			if _, ok := ended[id]; ok {
				down++
			}
		}
		return up, down
	}

	var took []time.Duration
	for round := range rounds {
		ids := make([]string, runs)
		for i := range ids {
			ids[i] = fmt.Sprintf("mass-%d-%d", round, i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		// At most 50 starting at once, as a pool fills on 2 cores.
		submitted := 0
		testenv.WaitFor(t, 4*time.Minute, fmt.Sprintf("round %d: all %d runs started", round, runs), func() bool {
			up, down := count(ids)
			if down > 0 {
				t.Fatalf("round %d: %d runs ended before the cancel", round, down)
			}
			for ; submitted < runs && submitted-up < 50; submitted++ {
				if err := c.Submit(ctx, protocol.Job{RunID: ids[submitted], Profile: "idle"}); err != nil {
					t.Fatal(err)
				}
			}
			return up == runs
		})
		// Every request at once, as a client cancelling a whole pool does.
		began := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for _, id := range ids {
			wg.Go(func() {
				if _, err := c.Cancel(ctx, id); err != nil {
					errs <- fmt.Errorf("cancel %s: %w", id, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		deadline := time.Now().Add(massCancelWithin - time.Since(began))
		for {
			if _, down := count(ids); down == runs {
				break
			}
			if time.Now().After(deadline) {
				mu.Lock()
				var open []string
				for _, id := range ids {
					if _, ok := ended[id]; !ok {
						open = append(open, id)
					}
				}
				mu.Unlock()
				alive := 0
				for _, id := range open {
					if a, _ := sandbox.Alive(journal.Dir(filepath.Join(dir, "runs", id))); a {
						alive++
					}
				}
				t.Fatalf("round %d: %d of %d runs not ended %v after the cancels (%d of them with their runner alive): %s\nworker log about %s:\n%s",
					round, len(open), runs, massCancelWithin, alive, strings.Join(open[:min(len(open), 10)], " "), open[0], linesWith(logs.String(), open[0], 40))
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(began))
		cancel()
		mu.Lock()
		for _, id := range slices.Sorted(maps.Keys(ended)) {
			if st := ended[id]; strings.HasPrefix(id, fmt.Sprintf("mass-%d-", round)) && st.Status != protocol.StatusCancelled {
				t.Errorf("round %d: run %s ended %s, not cancelled: %s", round, id, st.Status, st.Reason)
			}
		}
		mu.Unlock()
		// Every runner is gone, not only its status out. The status goes
		// out on the runner's sentinel, and the runner exits (drops its
		// lock) just after it wrote that: wait, bounded, for the exits.
		gone := time.Now().Add(runnersGoneWithin)
		for _, id := range ids {
			for {
				alive, err := sandbox.Alive(journal.Dir(filepath.Join(dir, "runs", id)))
				if err == nil && !alive {
					break
				}
				if time.Now().After(gone) {
					t.Fatalf("round %d: run %s ended, runner alive %v (%v) %v after the last status", round, id, alive, err, runnersGoneWithin)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		t.Logf("round %d: %d runs cancelled at once, all ended cancelled %v after the first cancel", round, runs, took[round].Round(time.Millisecond))
	}
	if strings.Contains(logs.String(), "gave up cancelling") {
		t.Errorf("the worker gave up a cancel:\n%s", linesWith(logs.String(), "gave up cancelling", 40))
	}
	t.Logf("%d rounds of %d runs: all cancelled within %v, worst %v", rounds, runs, massCancelWithin, slices.Max(took).Round(time.Millisecond))
}

// linesWith returns the last max lines of s that contain sub.
func linesWith(s, sub string, max int) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out[len(out)-min(len(out), max):], "\n")
}
