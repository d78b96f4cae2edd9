package worker

import (
	"testing"
	"time"
)

// TestAdaptivePoolSize: an adaptive pool keeps nothing before the
// profile's first start, one sandbox for adaptiveIdle after a start, two
// while two starts fall within adaptiveBurst, and says when its size
// falls; an explicit pool keeps its size.
func TestAdaptivePoolSize(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := &chainPool{size: 2, adaptive: true}
	check := func(at time.Time, want int, until time.Duration) {
		t.Helper()
		if n, u := p.want(at); n != want || u != until {
			t.Errorf("at +%s: want() = %d, %s; want %d, %s", at.Sub(t0), n, u, want, until)
		}
	}
	check(t0, 0, 0)
	p.started(t0)
	check(t0.Add(time.Second), 1, adaptiveIdle-time.Second)
	p.started(t0.Add(10 * time.Second))
	check(t0.Add(20*time.Second), 2, adaptiveBurst-20*time.Second)
	check(t0.Add(adaptiveBurst), 1, adaptiveIdle-adaptiveBurst+10*time.Second)
	check(t0.Add(10*time.Second+adaptiveIdle), 0, 0)
	fixed := &chainPool{size: 3}
	if n, u := fixed.want(t0); n != 3 || u != 0 {
		t.Errorf("pool: 3 wants %d, %s", n, u)
	}
}
