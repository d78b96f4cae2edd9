package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/tenancy"
)

// The keys' lanes (protocol.Names.KeyJobSubject): a keyed job waits in
// its key's lane of its priority, and a worker with a free slot takes the
// next job of the key Fair puts first among those with jobs waiting and a
// slot free below their limit, its highest priority lane first. Each lane
// has a durable consumer of its own, shared by every worker, so a lane's
// jobs are delivered once and in order, as the main consumer's are.

// laneInactive is how long a lane's consumer lives with no pull: a key
// that comes back gets a new one.
const laneInactive = 24 * time.Hour

// reapEvery bounds how often a worker checks a full key's slots for ended
// runs.
const reapEvery = 2 * time.Second

// drainedFor is how long a lane whose pull found no job is passed over
// while no job is published on any lane. The stream counts a lane's jobs
// until they are acknowledged, at their runs' end: a lane whose jobs are
// all running looks full of them. Without the pause every look claimed a
// key slot for it, pulled nothing and gave the slot back, and the slot's
// release woke the intake to look again, as long as the runs lasted (a
// busy loop of KV writes and stream reads on every worker with a free
// slot). A job given back to such a lane (a nak) is found after the pause.
const drainedFor = time.Second

// laneDurable is the durable consumer of key's lane of priority prio.
func laneDurable(key string, prio int) string { return "lane-" + key + "-" + strconv.Itoa(prio) }

// lanes is one intake's view of the keys' lanes.
type lanes struct {
	in     *Intake
	stream jetstream.Stream
	sub    *nats.Subscription

	mu      sync.Mutex
	arrived uint64 // lane publishes seen
	maybe   bool   // the lanes may hold a job
	blocked bool   // the last look found jobs only of keys at their limit
	wake    chan struct{}
	created map[string]bool
	reaped  map[string]time.Time
	fair    *tenancy.Fair
	// drained: the lanes (by durable) whose last pull found no job, when,
	// and the lane publishes seen then.
	drained map[string]drainedLane
}

type drainedLane struct {
	at      time.Time
	arrived uint64
}

func (in *Intake) openLanes(ctx context.Context) (*lanes, error) {
	st, err := in.js.Stream(ctx, in.names.JobsStream())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotConsume, err)
	}
	l := &lanes{in: in, stream: st, maybe: true, wake: make(chan struct{}, 1),
		created: map[string]bool{}, reaped: map[string]time.Time{}, fair: tenancy.NewFair(), drained: map[string]drainedLane{}}
	// Every job published on a lane wakes an idle intake; the stream keeps
	// the job, this only says to look.
	l.sub, err = in.js.Conn().Subscribe(in.names.KeyJobs(), func(*nats.Msg) {
		l.mu.Lock()
		l.arrived++
		l.maybe = true
		l.mu.Unlock()
		l.signal()
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *lanes) close() { _ = l.sub.Unsubscribe() }

func (l *lanes) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// interruptible is ctx, ended early when a lane gets a job or, while the
// lanes are blocked, a key slot is freed: a long pull on the main
// consumer must not keep a free slot from them.
func (l *lanes) interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	var slotFreed <-chan struct{}
	l.mu.Lock()
	if l.blocked && l.in.slots != nil {
		slotFreed = l.in.slots.Changed()
	}
	l.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-l.wake:
			cancel()
		case <-slotFreed:
			cancel()
		}
	}()
	return ctx, cancel
}

// waiting reads which lanes hold jobs: key → priority → count. No lanes
// are read while none may hold a job (no lane publish seen since a look
// found them empty), so a fleet without keys pays nothing.
func (l *lanes) waiting(ctx context.Context) (map[string]map[int]uint64, error) {
	l.mu.Lock()
	if !l.maybe {
		l.mu.Unlock()
		return nil, nil
	}
	gen := l.arrived
	l.mu.Unlock()
	info, err := l.stream.Info(ctx, jetstream.WithSubjectFilter(l.in.names.KeyJobs()))
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]uint64{}
	for subj, n := range info.State.Subjects {
		key, prio, ok := l.in.names.ParseKeyJobSubject(subj)
		if !ok || n == 0 {
			continue
		}
		if out[key] == nil {
			out[key] = map[int]uint64{}
		}
		out[key][prio] = n
	}
	if len(out) == 0 {
		l.mu.Lock()
		if l.arrived == gen {
			l.maybe = false
		}
		l.mu.Unlock()
	}
	return out, nil
}

// serve starts the next job of the keys' lanes on the slot the caller
// took, and reports whether it did (the slot is then the job's).
func (l *lanes) serve(ctx context.Context, run func(Job, *tenancy.Slot)) bool {
	in := l.in
	byKey, err := l.waiting(ctx)
	if err != nil {
		in.log.Warn().Err(err).Msg("read the keys' lanes")
		return false
	}
	if len(byKey) == 0 {
		l.setBlocked(false)
		return false
	}
	ten := in.tenancy()
	l.mu.Lock()
	arrived := l.arrived
	l.mu.Unlock()
	// A key's lanes with a job to pull, as far as is known: those not
	// drained since the last lane publish (drainedFor).
	ready := map[string][]int{}
	for key, byPrio := range byKey {
		for prio := range byPrio {
			d, ok := l.drained[laneDurable(key, prio)]
			if !ok || d.arrived != arrived || time.Since(d.at) >= drainedFor {
				ready[key] = append(ready[key], prio)
			}
		}
	}
	// full: a key with jobs waiting is at its limit; only then may a slot
	// freed anywhere let a job start.
	var open []string
	full := false
	for key := range byKey {
		if lim := ten.Limit(key); lim == 0 || in.slots == nil || in.slots.Held(key) < lim {
			if len(ready[key]) > 0 {
				open = append(open, key)
			}
		} else {
			full = true
			l.reap(ctx, key)
		}
	}
	for _, key := range l.fair.Order(open) {
		var slot *tenancy.Slot
		if lim := ten.Limit(key); lim > 0 && in.slots != nil {
			if slot, err = in.slots.Acquire(ctx, key, lim); err != nil {
				if errors.Is(err, tenancy.ErrKeyFull) {
					full = true
				} else {
					in.log.Warn().Err(err).Str("key", key).Msg("claim a key slot")
				}
				continue
			}
		}
		prios := ready[key]
		slices.Sort(prios)
		slices.Reverse(prios)
		for _, prio := range prios {
			msg := l.pull(ctx, key, prio)
			if msg == nil {
				if ctx.Err() == nil {
					l.drained[laneDurable(key, prio)] = drainedLane{at: time.Now(), arrived: arrived}
				}
				continue
			}
			if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
				// The lane's last job: the next look need not claim a
				// slot to find it empty while this one runs.
				l.drained[laneDurable(key, prio)] = drainedLane{at: time.Now(), arrived: arrived}
			} else {
				delete(l.drained, laneDurable(key, prio))
			}
			if l.take(ctx, msg, key, prio, slot, run) {
				l.fair.Served(key, ten.Weight(key))
				l.setBlocked(false)
				return true
			}
			// Not this key's after all (moved, or rejected): its slot is
			// still free for the next.
		}
		if slot != nil {
			slot.Release(ctx)
		}
	}
	l.setBlocked(full)
	return false
}

// fetchWait is how long the main consumer's next fetch may wait: at most
// drainedFor while a lane is passed over, so a job given back to it is
// not left there for a whole fetch.
func (l *lanes) fetchWait(wait time.Duration) time.Duration {
	for k, d := range l.drained {
		if time.Since(d.at) >= drainedFor {
			delete(l.drained, k)
		}
	}
	if len(l.drained) > 0 {
		return min(wait, drainedFor)
	}
	return wait
}

func (l *lanes) setBlocked(b bool) {
	l.mu.Lock()
	l.blocked = b
	l.mu.Unlock()
}

// reap frees the slots of key's ended runs, at most every reapEvery.
func (l *lanes) reap(ctx context.Context, key string) {
	in := l.in
	if in.slots == nil || in.runStates == nil || time.Since(l.reaped[key]) < reapEvery {
		return
	}
	l.reaped[key] = time.Now()
	in.slots.Reap(ctx, key, in.runStates, max(2*in.ackWait, time.Minute))
}

// pull takes the next job of a lane, creating its consumer on first use
// or when it is gone.
func (l *lanes) pull(ctx context.Context, key string, prio int) jetstream.Msg {
	durable := laneDurable(key, prio)
	for try := range 2 {
		if !l.created[durable] || try > 0 {
			if _, err := l.in.create(ctx, jetstream.ConsumerConfig{
				Durable:           durable,
				Description:       "baton workers: jobs of key " + key + ", priority " + strconv.Itoa(prio),
				FilterSubject:     l.in.names.KeyJobSubject(key, prio),
				AckPolicy:         jetstream.AckExplicitPolicy,
				AckWait:           l.in.ackWait,
				MaxDeliver:        -1,
				MaxAckPending:     -1,
				InactiveThreshold: laneInactive,
			}); err != nil {
				l.in.log.Warn().Err(err).Str("consumer", durable).Msg("create a lane's consumer")
				return nil
			}
			l.created[durable] = true
		}
		msg, err := l.in.pullOne(ctx, durable, 0)
		if err == nil {
			return msg
		}
		if ctx.Err() != nil {
			return nil
		}
		l.in.log.Debug().Err(err).Str("consumer", durable).Msg("pull a lane; its consumer is created again")
	}
	return nil
}

// take starts msg, a job of key's lane prio, on slot (nil for a key with
// no limit); false when the job was not started here: rejected, or moved
// to the lane its job names, or given back.
func (l *lanes) take(ctx context.Context, msg jetstream.Msg, key string, prio int, slot *tenancy.Slot, run func(Job, *tenancy.Slot)) bool {
	in := l.in
	j, rejected := in.accept(ctx, msg)
	if rejected {
		return false
	}
	k, err := in.tenancy().KeyOf(j.Job)
	if err != nil {
		in.reject(ctx, msg, err)
		return false
	}
	if k != key || j.Job.EffectivePriority() != prio {
		in.moveToLane(ctx, msg, j, k)
		return false
	}
	j.Key = k
	run(j, slot)
	return true
}

// moveToLane puts a keyed job in its key's lane and acknowledges it where
// it was (the main subjects, or a lane it does not belong in). The copy's
// message id is the original's stream sequence, so a move repeated after a
// lost ack is stored once. A job of no key ("" after a tenantLabel change)
// goes back to the run subject.
func (in *Intake) moveToLane(ctx context.Context, msg jetstream.Msg, j Job, key string) {
	subj := in.names.RunJobSubject()
	if key != "" {
		subj = in.names.KeyJobSubject(key, j.Job.EffectivePriority())
	}
	out := nats.NewMsg(subj)
	out.Data = msg.Data()
	for h, vs := range msg.Headers() {
		if h != nats.MsgIdHdr && h != nats.ExpectedLastSubjSeqHdr && h != nats.ExpectedLastSeqHdr && h != nats.ExpectedStreamHdr && h != nats.ExpectedLastMsgIdHdr {
			out.Header[h] = vs
		}
	}
	md, err := msg.Metadata()
	if err != nil {
		_ = msg.NakWithDelay(time.Second)
		return
	}
	out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("lane:%d", md.Sequence.Stream))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	log := in.log.With().Str("run_id", j.Job.RunID).Str("key", key).Str("subject", subj).Logger()
	if _, err := in.js.PublishMsg(pctx, out); err != nil {
		log.Warn().Err(err).Msg("move a keyed job to its lane; it will be redelivered")
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if err := msg.DoubleAck(pctx); err != nil {
		// Redelivered, it is moved again: the lane keeps one copy.
		log.Warn().Err(err).Msg("ack a job moved to its lane")
	}
	log.Debug().Msg("job moved to its key's lane")
}
