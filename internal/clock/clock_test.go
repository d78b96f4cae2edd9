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
