package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is the time a loop reads and waits on: Real in production, a
// Manual in a test that moves time rather than waits for it.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or less if ctx ends first; it reports whether d passed.
	Sleep(ctx context.Context, d time.Duration) bool
}

// Real is the system's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) bool { return Sleep(ctx, d) }

// Manual is a clock that moves only when Advance moves it. A test waits
// for a loop to sleep (Sleeping), then advances past the sleep's end,
// instead of sleeping itself.
type Manual struct {
	mu       sync.Mutex
	now      time.Time
	sleepers []*sleeper
	slept    chan struct{} // closed and replaced at each new sleep
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

// NewManual is a Manual clock reading now.
func NewManual(now time.Time) *Manual { return &Manual{now: now, slept: make(chan struct{})} }

// Now is the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Sleep waits until Advance has moved the clock d past now, or ctx ends.
func (m *Manual) Sleep(ctx context.Context, d time.Duration) bool {
	m.mu.Lock()
	s := &sleeper{until: m.now.Add(d), wake: make(chan struct{})}
	if d <= 0 {
		m.mu.Unlock()
		return true
	}
	m.sleepers = append(m.sleepers, s)
	close(m.slept)
	m.slept = make(chan struct{})
	m.mu.Unlock()
	select {
	case <-s.wake:
		return true
	case <-ctx.Done():
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, o := range m.sleepers {
			if o == s {
				m.sleepers = append(m.sleepers[:i], m.sleepers[i+1:]...)
				break
			}
		}
		return false
	}
}

// Advance moves the clock by d and wakes the sleeps it has passed.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	kept := m.sleepers[:0]
	for _, s := range m.sleepers {
		if m.now.Before(s.until) {
			kept = append(kept, s)
		} else {
			close(s.wake)
		}
	}
	m.sleepers = kept
}

// Sleeping waits, until ctx ends, for n sleeps to be waiting on the clock,
// and reports whether they are.
func (m *Manual) Sleeping(ctx context.Context, n int) bool {
	for {
		m.mu.Lock()
		got, slept := len(m.sleepers), m.slept
		m.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-slept:
		case <-ctx.Done():
			return false
		}
	}
}
