package worker

import (
	"testing"
	"time"
)

// TestRefusalLogIsBounded: a flood of refused requests logs one line at
// once, then at most one per refusalLogEvery, each counting the refusals
// it stands for.
func TestRefusalLogIsBounded(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1_000_000, 0)
	logged, total := 0, 0
	for i := range 10_000 {
		now := t0.Add(time.Duration(i) * 5 * time.Millisecond) // 50 s of refusals
		if n, ok := l.note(now); ok {
			logged++
			total += n
		}
	}
	if logged != 5 {
		t.Fatalf("%d lines for 10,000 refusals over 50 s, want 5 (one per %v)", logged, refusalLogEvery)
	}
	if n, ok := l.note(t0.Add(time.Minute)); !ok || total+n != 10_001 {
		t.Fatalf("the lines count %d refusals (next line %d, %v), want 10,001", total, n, ok)
	}
}
