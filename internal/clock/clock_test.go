package clock

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	start := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) {
		t.Fatal("Sleep of 20 ms with a live context said it was cut short")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Sleep of 20 ms returned after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start = time.Now()
	if Sleep(ctx, time.Minute) {
		t.Fatal("Sleep of a minute said it passed though its context ended")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Sleep cut by its context after 20 ms returned after %v", d)
	}
}

func TestManual(t *testing.T) {
	start := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	m := NewManual(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	woke := make(chan bool, 2)
	go func() { woke <- m.Sleep(ctx, time.Minute) }()
	go func() { woke <- m.Sleep(ctx, time.Hour) }()
	if !m.Sleeping(ctx, 2) {
		t.Fatal("the two sleeps never waited on the clock")
	}
	m.Advance(59 * time.Second)
	select {
	case <-woke:
		t.Fatal("a sleep of a minute woke 59 s in")
	default:
	}
	m.Advance(time.Second)
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("the minute's sleep said it was cut short")
		}
	case <-ctx.Done():
		t.Fatal("a minute passed on the clock and its sleep did not wake")
	}
	if got := m.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("Now = %v, want %v", got, start.Add(time.Minute))
	}
	cancel()
	if ok := <-woke; ok {
		t.Fatal("the hour's sleep, cut by its context, said it passed")
	}
	if !m.Sleep(context.Background(), 0) {
		t.Fatal("a sleep of nothing did not pass")
	}
}

// fired reports whether t has fired, without waiting.
func fired(t Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

// TestManualTimers: a Manual clock's timers fire once, when it passes
// their time; its tickers at every period, dropping a tick not received;
// Stop and Reset drop a firing not received, as time.Timer's do.
func TestManualTimers(t *testing.T) {
	m := NewManual(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	timer, ticker := m.NewTimer(time.Second), m.NewTicker(time.Minute)
	if !m.Sleeping(ctx, 2) {
		t.Fatal("a timer and a ticker are not armed on the clock")
	}
	m.Advance(999 * time.Millisecond)
	if fired(timer) {
		t.Fatal("a timer of 1 s fired 999 ms in")
	}
	m.Advance(time.Millisecond)
	if !fired(timer) || fired(timer) {
		t.Fatal("a timer of 1 s did not fire once at 1 s")
	}
	m.Advance(time.Hour)
	if fired(timer) {
		t.Fatal("a timer fired twice")
	}
	// An hour's 60 ticks, unread, are one; the next comes on the
	// ticker's own minutes (the clock is 1 s past one).
	if !fired(ticker) || fired(ticker) {
		t.Fatal("a ticker passed by 60 periods does not hold one tick")
	}
	m.Advance(58 * time.Second)
	if fired(ticker) {
		t.Fatal("a ticker of a minute ticked before its next minute")
	}
	m.Advance(time.Second)
	if !fired(ticker) {
		t.Fatal("a ticker of a minute did not tick on its next minute")
	}
	timer.Reset(time.Second)
	m.Advance(time.Second)
	timer.Reset(time.Second) // drops the firing not received
	if fired(timer) {
		t.Fatal("a timer reset kept a firing from before")
	}
	timer.Stop()
	ticker.Stop()
	m.Advance(time.Hour)
	if fired(timer) || fired(ticker) {
		t.Fatal("a stopped timer or ticker fired")
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	if m.Sleeping(stopped, 1) {
		t.Fatal("stopped timers and tickers are still armed")
	}
	now := m.Now()
	if zero := m.NewTimer(0); !fired(zero) {
		t.Fatal("a timer of nothing did not fire at once")
	}
	if !m.Now().Equal(now) {
		t.Fatal("a timer moved the clock")
	}
}

// TestRealTimers: Real's timers and tickers are the time package's.
func TestRealTimers(t *testing.T) {
	timer, ticker := Real.NewTimer(time.Millisecond), Real.NewTicker(time.Millisecond)
	defer ticker.Stop()
	for _, c := range []Timer{timer, ticker, ticker} {
		select {
		case <-c.C():
		case <-time.After(10 * time.Second):
			t.Fatal("a timer or ticker of 1 ms did not fire in 10 s")
		}
	}
	timer.Reset(time.Hour)
	timer.Stop()
	if fired(timer) {
		t.Fatal("a stopped timer fired")
	}
}
