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
	// NewTimer fires once, d from now, as a time.Timer.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d, as a time.Ticker: a tick its reader is not
	// ready for is dropped, and the next one comes on time.
	NewTicker(d time.Duration) Timer
}

// Timer is a time.Timer or a time.Ticker of a Clock. As with those (since
// Go 1.23), no tick from before a Stop or Reset is received after it.
type Timer interface {
	// C delivers the time of each firing.
	C() <-chan time.Time
	// Reset makes a timer fire d from now, and a ticker every d from now.
	Reset(d time.Duration)
	// Stop ends the firings.
	Stop()
}

// Real is the system's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) bool { return Sleep(ctx, d) }
func (realClock) NewTimer(d time.Duration) Timer                  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Timer                 { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTimer) Stop()                 { t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTicker) Stop()                 { t.t.Stop() }

// Manual is a clock that moves only when Advance moves it. A test waits
// for a loop to wait on it (Sleeping), then advances past the wait's end,
// instead of sleeping itself.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiting map[*manualTimer]bool // the timers and tickers armed
	armed   chan struct{}         // closed and replaced at each arming
}

// NewManual is a Manual clock reading now.
func NewManual(now time.Time) *Manual {
	return &Manual{now: now, waiting: map[*manualTimer]bool{}, armed: make(chan struct{})}
}

// Now is the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Sleep waits until Advance has moved the clock d past now, or ctx ends.
func (m *Manual) Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := m.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// NewTimer fires once Advance has moved the clock d past now.
func (m *Manual) NewTimer(d time.Duration) Timer { return m.arm(&manualTimer{m: m}, d) }

// NewTicker fires each time Advance moves the clock past a multiple of d
// from now, once per Advance however many it passes.
func (m *Manual) NewTicker(d time.Duration) Timer {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	return m.arm(&manualTimer{m: m, ticker: true}, d)
}

// manualTimer is a timer or a ticker of a Manual clock.
type manualTimer struct {
	m      *Manual
	ticker bool
	period time.Duration  // a ticker's; guarded by m.mu
	until  time.Time      // the next firing; guarded by m.mu
	c      chan time.Time // holds one firing, as a time.Timer's
}

// arm (re)arms t to fire d from now (and, a ticker, every d), dropping a
// firing not yet received.
func (m *Manual) arm(t *manualTimer, d time.Duration) *manualTimer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.c == nil {
		t.c = make(chan time.Time, 1)
	}
	drain(t.c)
	t.until = m.now.Add(d)
	if t.ticker {
		t.period = d
	} else if d <= 0 {
		t.c <- m.now
		delete(m.waiting, t)
		return t
	}
	m.waiting[t] = true
	close(m.armed)
	m.armed = make(chan struct{})
	return t
}

func drain(c chan time.Time) {
	select {
	case <-c:
	default:
	}
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Reset(d time.Duration) {
	if t.ticker && d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.m.arm(t, d)
}

func (t *manualTimer) Stop() {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	delete(t.m.waiting, t)
	drain(t.c)
}

// Advance moves the clock by d and fires the timers and tickers it has
// passed.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	for t := range m.waiting {
		if m.now.Before(t.until) {
			continue
		}
		select {
		case t.c <- m.now:
		default: // a tick not received yet: this one is dropped
		}
		if !t.ticker {
			delete(m.waiting, t)
			continue
		}
		for !m.now.Before(t.until) {
			t.until = t.until.Add(t.period)
		}
	}
}

// Sleeping waits, until ctx ends, for n sleeps, timers or tickers to be
// armed on the clock, and reports whether they are. A ticker stays armed
// until stopped: a loop on one is told apart by what it does at a tick.
func (m *Manual) Sleeping(ctx context.Context, n int) bool {
	for {
		m.mu.Lock()
		got, armed := len(m.waiting), m.armed
		m.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-armed:
		case <-ctx.Done():
			return false
		}
	}
}
