package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/testenv"
)

// TestNotifyUntilAnswered: a notice is sent again until the run's holder
// answers (here the third), then no more; one nobody answers stops after
// its retries' time.
func TestNotifyUntilAnswered(t *testing.T) {
	s := testenv.RunServer(t)
	nc, _ := testenv.Connect(t, s)
	w, err := New(nc, config.Default(), WithStateDir(t.TempDir()), WithNode("n"))
	if err != nil {
		t.Fatal(err)
	}
	w.notice = noticeTiming{ackWait: 100 * time.Millisecond, total: 3 * time.Second}
	var got, unanswered atomic.Int32
	answered := make(chan time.Time, 1)
	if _, err := nc.Subscribe("notice.answered", func(m *nats.Msg) {
		if got.Add(1) == 3 {
			ackNotice(m)
			answered <- time.Now()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("notice.unanswered", func(*nats.Msg) { unanswered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	w.notify(t.Context(), "notice.answered")
	w.notify(t.Context(), "notice.unanswered")
	select {
	case at := <-answered:
		// Tries at 0, 0.2 and 0.5 s (0.1 s each, then 0.1 and 0.2 s apart).
		if took := at.Sub(began); took < 400*time.Millisecond || took > 2*time.Second {
			t.Errorf("third try after %v, want about 0.5 s", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the notice was tried %d times in 5 s, never a third", got.Load())
	}
	// Wait, bounded, for the unanswered notice's five tries (a loaded
	// machine delays them), then past its retries' time for any more.
	testenv.WaitFor(t, 10*time.Second, "the unanswered notice's 5 tries", func() bool { return unanswered.Load() >= 5 })
	time.Sleep(max(0, w.notice.total+time.Second-time.Since(began)))
	if n := got.Load(); n != 3 {
		t.Errorf("an answered notice was sent %d times, want 3", n)
	}
	// 0, 0.2, 0.5, 1, 1.9 s; the next (3.6 s) would be past the 3 s.
	if n := unanswered.Load(); n != 5 {
		t.Errorf("an unanswered notice was sent %d times in %v, want 5", n, w.notice.total)
	}
}

// TestInputSweepPokesEveryFeeder: the input notices' watcher looks at
// every run's input each noticeSweep on one timer of its own, so a
// feeder waits for a poke alone and an idle run has no timer.
func TestInputSweepPokesEveryFeeder(t *testing.T) {
	s := testenv.RunServer(t)
	nc, _ := testenv.Connect(t, s)
	w, err := New(nc, config.Default(), WithStateDir(t.TempDir()), WithNode("n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Now())
	w.clock = clk
	feeders := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	w.inputPokes = map[string]chan struct{}{"a": feeders[0], "b": feeders[1]}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.inputNotices().run(ctx)
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !clk.Sleeping(wctx, 1) {
		t.Fatal("the input notices' watcher armed no timer: nothing sweeps the feeders")
	}
	clk.Advance(w.noticeSweep())
	for i, ch := range feeders {
		select {
		case <-ch:
		case <-wctx.Done():
			t.Fatalf("feeder %d not poked by the sweep", i)
		}
	}
}
