package worker

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// Bounds of a pool's refill.
const (
	prestartTimeout = 30 * time.Second
	prestartBackoff = time.Minute // the longest wait after failed prestarts
	refillDelay     = 50 * time.Millisecond
	// poolEntrySettled is how long a dead entry's directory stays
	// unchanged before it is removed: younger, another worker of the
	// node may be laying it out.
	poolEntrySettled = 10 * time.Second
)

// The adaptive pool of a profile without "pool" (config.PoolAuto): none
// until the profile's first run on this worker, then one sandbox while
// the profile has started a run in the last adaptiveIdle, two while it
// started two in the last adaptiveBurst. An idle profile costs nothing;
// a used one what one or two idle runs do.
const (
	adaptiveIdle  = 10 * time.Minute
	adaptiveBurst = time.Minute
)

// chainPool keeps a profile's sandboxes started ahead of its jobs
// (profile "pool", sandbox.Prestart): a start whose spec fits takes one
// (sandbox.Prestarted.Take), and the pool starts another in the
// background, one at a time. Its chains die with the worker.
type chainPool struct {
	profile    string
	shape      sandbox.Spec // RunID and RunDir set per entry
	size       int          // the entries kept; adaptive: the most
	adaptive   bool         // sized by the profile's recent starts (want)
	runsDir    string       // where the entries' directories go
	runner     string       // the binary the chains run from
	prestarted prometheus.Counter
	waiting    prometheus.Gauge // len(ready), set under mu
	log        zerolog.Logger
	clock      clock.Clock

	mu    sync.Mutex
	ready []*sandbox.Prestarted
	kick  chan struct{}
	// last and prev are the profile's two latest starts on this worker
	// (adaptive pools only).
	last, prev time.Time
}

// newPools makes the pools of the profiles that ask for one, and the
// adaptive pools of those that leave "pool" out. A profile whose shape
// cannot be resolved (its "{baton}" unknown) gets none, and says why; a
// profile without "pool" whose runs cannot be pooled (tools, secrets,
// CIDR entries) gets none quietly.
func (w *Worker) newPools() map[string]*chainPool {
	pools := map[string]*chainPool{}
	for name, p := range w.cfg.Profiles {
		adaptive := p.Pool == config.PoolAuto
		if p.Pool == 0 || adaptive && len(p.Tools) > 0 {
			continue
		}
		lg := w.log.Warn()
		if adaptive {
			lg = w.log.Debug()
		}
		inv, err := w.cfg.Resolve(protocol.Job{RunID: "pool", Profile: name}, w.binary)
		if err != nil {
			lg.Err(err).Str("profile", name).Msg("no pool: the profile's sandbox cannot be resolved")
			continue
		}
		shape := w.sandboxSpec("pool", "", inv)
		if err := sandbox.Poolable(shape); err != nil {
			lg.Err(err).Str("profile", name).Msg("no pool")
			continue
		}
		size := p.Pool
		if adaptive {
			size = 2
		}
		pools[name] = &chainPool{profile: name, shape: shape, size: size, adaptive: adaptive,
			runsDir: filepath.Join(w.stateDir, "runs"), runner: w.runner, prestarted: w.metrics.prestarted.WithLabelValues(name), waiting: w.metrics.poolWaiting.WithLabelValues(name),
			log: w.log.With().Str("profile", name).Logger(), clock: w.clock, kick: make(chan struct{}, 1)}
	}
	return pools
}

// run keeps the pool full until ctx ends, then closes every entry. An
// adaptive pool's one timer wakes it when its size is to fall.
func (p *chainPool) run(ctx context.Context) {
	defer p.closeAll()
	shrink := p.clock.NewTimer(time.Hour)
	shrink.Stop()
	defer shrink.Stop()
	var backoff time.Duration
	for ctx.Err() == nil {
		want, until := p.want(p.clock.Now())
		if p.trim(want) >= want {
			var wake <-chan time.Time
			if until > 0 {
				shrink.Reset(until)
				wake = shrink.C()
			}
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-wake:
			}
			shrink.Stop()
			continue
		}
		e, err := p.prestart(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, time.Second), prestartBackoff)
			p.log.Warn().Err(err).Dur("retry_in", backoff).Msg("prestart a sandbox")
			p.clock.Sleep(ctx, backoff)
			continue
		}
		backoff = 0
		p.mu.Lock()
		p.ready = append(p.ready, e)
		p.waiting.Set(float64(len(p.ready)))
		p.mu.Unlock()
		p.prestarted.Inc()
		p.log.Debug().Str("dir", string(e.Dir())).Int("ready", p.count()).Msg("sandbox prestarted")
		// An entry that ends untaken (killed, its sandbox failed) is
		// replaced.
		go func() {
			select {
			case <-e.Exited():
				p.poke()
			case <-ctx.Done():
			}
		}()
	}
}

// prestart starts one entry.
func (p *chainPool) prestart(ctx context.Context) (*sandbox.Prestarted, error) {
	id := randomHex(8)
	shape := p.shape
	shape.RunID = "pool-" + id
	shape.RunDir = filepath.Join(p.runsDir, sandbox.PoolEntryPrefix+id)
	shape.Nonce = journal.NewNonce()
	ctx, cancel := context.WithTimeout(ctx, prestartTimeout)
	defer cancel()
	return sandbox.Prestart(ctx, shape, sandbox.WithBinary(p.runner))
}

// want is the number of entries the pool keeps at now, and how long
// until that falls (0: not while nothing happens).
func (p *chainPool) want(now time.Time) (int, time.Duration) {
	if !p.adaptive {
		return p.size, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.last.IsZero() || now.Sub(p.last) >= adaptiveIdle:
		return 0, 0
	case !p.prev.IsZero() && now.Sub(p.prev) < adaptiveBurst:
		return p.size, p.prev.Add(adaptiveBurst).Sub(now)
	default:
		return 1, p.last.Add(adaptiveIdle).Sub(now)
	}
}

// started notes a start of the profile's run, pooled or cold, which sizes
// an adaptive pool.
func (p *chainPool) started(at time.Time) {
	p.mu.Lock()
	p.prev, p.last = p.last, at
	p.mu.Unlock()
}

// trim closes the entries beyond n and returns how many are left.
func (p *chainPool) trim(n int) int {
	live := p.count()
	if live <= n {
		return live
	}
	p.mu.Lock()
	extra := p.ready[n:]
	p.ready = p.ready[:n:n]
	p.waiting.Set(float64(n))
	p.mu.Unlock()
	for _, e := range extra {
		go p.discard(e)
	}
	p.log.Debug().Int("closed", len(extra)).Int("ready", n).Msg("pool shrunk: the profile is idle")
	return n
}

// count is the number of entries, closing those that ended.
func (p *chainPool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.ready[:0]
	for _, e := range p.ready {
		if e.Alive() {
			live = append(live, e)
			continue
		}
		go p.discard(e)
	}
	clear(p.ready[len(live):])
	p.ready = live
	p.waiting.Set(float64(len(live)))
	return len(p.ready)
}

// get hands out an entry spec fits, or nil, and has the pool refilled.
func (p *chainPool) get(spec sandbox.Spec) *sandbox.Prestarted {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range p.ready {
		if !e.Alive() || e.Fits(spec) != nil {
			continue
		}
		p.ready = append(p.ready[:i], p.ready[i+1:]...)
		p.waiting.Set(float64(len(p.ready)))
		return e
	}
	return nil
}

func (p *chainPool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// discard closes an entry no run took.
func (p *chainPool) discard(e *sandbox.Prestarted) {
	if err := e.Close(); err != nil {
		p.log.Warn().Err(err).Msg("discard a prestarted sandbox")
	}
}

func (p *chainPool) closeAll() {
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.waiting.Set(0)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range ready {
		wg.Go(func() { p.discard(e) })
	}
	wg.Wait()
}

// stalePoolEntries removes the directories that a killed worker's
// prestarted sandboxes left (a pool's chains die with their worker), at
// start and once those of a worker killed just before have settled; the
// prune catches any later.
type stalePoolEntries struct {
	runsDir string
	log     zerolog.Logger
	clock   clock.Clock
}

func (s stalePoolEntries) run(ctx context.Context) {
	for _, wait := range []time.Duration{0, poolEntrySettled + time.Second} {
		if !s.clock.Sleep(ctx, wait) {
			return
		}
		if err := sandbox.RemoveStalePoolEntries(s.runsDir, poolEntrySettled); err != nil {
			s.log.Warn().Err(err).Msg("remove prestarted sandboxes' directories of a worker gone")
		}
	}
}

// startRunner starts the run of spec: on a prestarted sandbox of its
// profile's pool if one fits, else cold (sandbox.Start). pooled says
// which.
func (w *Worker) startRunner(ctx context.Context, profile string, spec sandbox.Spec, input []byte, opts ...sandbox.StartOption) (_ *sandbox.Runner, pooled bool, err error) {
	if p := w.pools[profile]; p != nil {
		p.started(w.clock.Now())
		if p.adaptive {
			// The first start of a profile gives it a pool, a second
			// within adaptiveBurst a second entry: prestarted once this
			// start has had the CPUs, as after a take.
			defer time.AfterFunc(refillDelay, p.poke)
		}
		if e := p.get(spec); e != nil {
			rn, err := e.Take(ctx, spec, input, opts...)
			// Refilled once the agent has had the CPUs to start: a
			// chain's start (six Go programs, namespaces, mounts) beside
			// it would double its time on a small node.
			time.AfterFunc(refillDelay, p.poke)
			if !errors.Is(err, sandbox.ErrPoolEntryGone) && !errors.Is(err, sandbox.ErrNotPooled) {
				return rn, true, err
			}
			// Nothing of the run was written: it starts cold.
		}
	}
	rn, err := sandbox.Start(ctx, spec, input, opts...)
	return rn, false, err
}
