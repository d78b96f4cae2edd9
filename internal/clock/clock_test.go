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
