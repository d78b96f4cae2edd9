package fakeagent

import (
	"context"
	"syscall"
	"time"
)

// burn keeps one thread busy until the process has used d more CPU time
// (user and system, its rusage), or ctx ends. It counts CPU time, not
// wall time: on a loaded machine it takes longer, and spends the same.
func burn(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	start, err := cpuTime()
	if err != nil {
		return err
	}
	x := uint64(1)
	for {
		// About a millisecond of work between reads of the clock.
		for range 200_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, err := cpuTime()
		if err != nil {
			return err
		}
		if now-start >= d {
			burnSink = x
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// burnSink keeps burn's work from being optimized away.
var burnSink uint64

// cpuTime is the CPU time the process has used.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
