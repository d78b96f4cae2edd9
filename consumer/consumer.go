package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/tenancy"
)

// DurableName is the shared durable consumer of new-run jobs.
const DurableName = "workers"

// Job is a decoded, resolved job handed to the dispatcher.
type Job struct {
	Job        protocol.Job
	Invocation config.Invocation
	Msg        jetstream.Msg
	// Key is the job's concurrency key (config.Tenancy.KeyOf), "" for none.
	Key string
}

// Dispatch runs one job. It owns the job's message, which it settles once
// with Intake.Settle, and holds its slot until it returns.
type Dispatch func(ctx context.Context, j Job)

// Intake pulls jobs, one per free slot.
type Intake struct {
	js       jetstream.JetStream
	names    protocol.Names
	cfg      *config.Config
	self     string
	limits   protocol.Limits
	log      zerolog.Logger
	ackWait  time.Duration
	maxWait  time.Duration
	onReject func(protocol.Reason)
	onDrop   func(protocol.Reason)
	// profileWait is how long a job of a profile at its maxConcurrent
	// waits before it is delivered again.
	profileWait time.Duration
	// rejectWait is how long a job whose rejection could not be published
	// waits before it is delivered (and rejected) again.
	rejectWait time.Duration
	// admitWait is how long a job Admit refused waits before it is
	// delivered again.
	admitWait time.Duration
	// tenancy is the configuration's tenancy now (it changes on reload);
	// slots, when set, bound the keys' runs across the cluster, and
	// runStates tells their reaper which runs have ended.
	tenancy   func() *config.Tenancy
	slots     *tenancy.Slots
	runStates tenancy.RunStates
	// running is the pool of Run, for Load.
	running atomic.Pointer[pool]
}

// idleFetchWait is how long an idle intake's pull request waits at the
// server for a job. A job published meanwhile is handed to it at once, a
// stop or a reconnection ends it early (pullOne), so its length only sets
// how often an idle worker asks again: every 2 s, its earlier value, the
// requests, their expiries and replies were most of what an idle worker
// and its server did.
const idleFetchWait = 30 * time.Second

// Option configures an Intake.
type Option func(*Intake)

// WithLogger sets the logger.
func WithLogger(l zerolog.Logger) Option { return func(in *Intake) { in.log = l } }

// WithSelf is the baton binary path that replaces "{baton}" in profiles.
func WithSelf(path string) Option { return func(in *Intake) { in.self = path } }

// WithOnReject is called with the reason of every job moved to the DLQ.
func WithOnReject(f func(protocol.Reason)) Option { return func(in *Intake) { in.onReject = f } }

// WithOnDrop is called with the reason of every job terminated because its
// rejection could not be published to the DLQ.
func WithOnDrop(f func(protocol.Reason)) Option { return func(in *Intake) { in.onDrop = f } }

// WithAckWait sets the consumer's AckWait (default 60s).
func WithAckWait(d time.Duration) Option { return func(in *Intake) { in.ackWait = d } }

// WithFetchWait bounds one idle fetch (default idleFetchWait).
func WithFetchWait(d time.Duration) Option { return func(in *Intake) { in.maxWait = d } }

// WithTenancy reads the tenancy (keys' limits and weights) from f at each
// job, so a reloaded configuration takes effect at once (default: cfg's).
func WithTenancy(f func() *config.Tenancy) Option { return func(in *Intake) { in.tenancy = f } }

// WithSlots bounds each key's runs across the cluster by its limit, with
// the slots of slots; states tells which runs have ended, to free the
// slots of runs whose holder died before it could. Without it, keys are
// served fairly but not limited.
func WithSlots(slots *tenancy.Slots, states tenancy.RunStates) Option {
	return func(in *Intake) { in.slots, in.runStates = slots, states }
}

// New returns an Intake for the jobs stream named by names.
func New(js jetstream.JetStream, names protocol.Names, cfg *config.Config, opts ...Option) *Intake {
	in := &Intake{
		js: js, names: names, cfg: cfg,
		log:         zerolog.Nop(),
		ackWait:     60 * time.Second,
		maxWait:     idleFetchWait,
		profileWait: 2 * time.Second,
		rejectWait:  5 * time.Second,
		admitWait:   2 * time.Second,
		limits:      protocol.Limits{MaxBytes: cfg.MaxJobBytes},
		tenancy:     func() *config.Tenancy { return &cfg.Tenancy },
	}
	for _, o := range opts {
		o(in)
	}
	return in
}

// AttachDispatch takes over a run named by an attach job. It owns the
// message and holds a slot until it returns.
type AttachDispatch func(ctx context.Context, msg jetstream.Msg)

// Handlers are what Run calls with the jobs it takes.
type Handlers struct {
	// Run starts a new run; it is called only while a slot is free.
	Run Dispatch
	// Attach takes over a run of this node. Attach jobs are taken even when
	// every slot is busy: the run exists already and must be published.
	Attach AttachDispatch
	// Admit, if set, is asked before Run whether the node has room for the
	// job (the worker's disk budget); a job it refuses waits in the stream
	// (AdmitWait) for whichever worker has room, and Run is not called.
	Admit func(j Job) error
}

// ErrCannotConsume: a jobs consumer cannot be created or recreated, so the
// worker would take no job; it must stop and say why.
var ErrCannotConsume = errors.New("consumer: cannot consume jobs")

// Run fetches new-run jobs while slots are free, and this node's attach
// jobs always, until ctx ends; then it waits for every dispatch to return.
// It fails with ErrCannotConsume, after cancelling the dispatches' context
// and waiting for them, when a consumer cannot be created, or was deleted
// and cannot be created again.
func (in *Intake) Run(ctx context.Context, slots int, node string, h Handlers) error {
	runCfg := jetstream.ConsumerConfig{
		Durable:        DurableName,
		Description:    "baton workers: new runs (and sessions' runs)",
		FilterSubjects: []string{in.names.RunJobSubject(), in.names.RetryJobSubject(), in.names.SessionJobs()},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        in.ackWait,
		MaxDeliver:     -1,
		MaxAckPending:  -1,
	}
	attachCfg := jetstream.ConsumerConfig{
		Durable:       AttachDurableName(node),
		Description:   "baton workers of node " + node + ": re-attach runs",
		FilterSubject: in.names.AttachJobSubject(node),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       in.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
	}
	if _, err := in.create(ctx, runCfg); err != nil {
		return err
	}
	if _, err := in.create(ctx, attachCfg); err != nil {
		return err
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	// The dispatches' context ends only once both fetch loops have, and
	// with them this intake's pull requests: a run handed off at stop
	// publishes its attach job when no request of ours can take it.
	dctx, stopDispatches := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopDispatches(nil)
	p := newPool(slots)
	in.running.Store(p)
	ln, err := in.openLanes(ctx)
	if err != nil {
		return err
	}
	defer ln.close()
	var wg sync.WaitGroup
	var loops sync.WaitGroup
	// start runs j on the slot the loop took. A job of a limited key
	// runs on its run's slot if a redelivered job's run holds one still,
	// else on keySlot (claimed for it from the key's lane) or one claimed
	// now; a job whose key is full waits in the stream.
	start := func(j Job, keySlot *tenancy.Slot) {
		prof := j.Invocation.Profile
		giveBack := func(delay time.Duration) {
			_ = j.Msg.NakWithDelay(delay)
			if keySlot != nil {
				keySlot.Release(ctx)
			}
			p.put()
		}
		if !p.takeProfile(prof, in.cfg.Profiles[prof].MaxConcurrent) {
			// The job waits in the stream, redelivered after the
			// delay to whichever worker has room.
			giveBack(in.profileWait)
			return
		}
		if h.Admit != nil {
			if err := h.Admit(j); err != nil {
				p.putProfile(prof)
				giveBack(in.admitWait)
				// Not at once again: the job just given back would come
				// straight back to this worker's next fetch.
				clock.Sleep(ctx, in.admitWait)
				return
			}
		}
		if lim := in.tenancy().Limit(j.Key); j.Key != "" && lim > 0 && in.slots != nil {
			switch {
			case in.slots.Renew(ctx, j.Job.RunID):
				// A redelivered job whose run holds a slot still.
				if keySlot != nil {
					keySlot.Release(ctx)
					keySlot = nil
				}
			case keySlot == nil:
				var err error
				if keySlot, err = in.slots.Acquire(ctx, j.Key, lim); err != nil {
					p.putProfile(prof)
					giveBack(in.profileWait)
					return
				}
				fallthrough
			default:
				if err := keySlot.Bind(ctx, j.Job.RunID); err != nil {
					in.log.Warn().Err(err).Str("run_id", j.Job.RunID).Msg("bind the key slot; the job will be redelivered")
					p.putProfile(prof)
					giveBack(time.Second)
					return
				}
			}
		} else if keySlot != nil { // the key's limit was lifted meanwhile
			keySlot.Release(ctx)
		}
		p.dispatched(1)
		wg.Go(func() {
			defer p.put()
			defer p.dispatched(-1)
			defer p.putProfile(prof)
			h.Run(dctx, j)
		})
	}
	loops.Go(func() {
		// The keys' lanes and the main subjects take turns. At every free
		// slot the keyed jobs that reached the main subjects are moved to
		// their lanes first, so a key's first job is in the running at the
		// first slot that frees, whatever waits before it on the main
		// subjects; the first job of no key found meanwhile is held until
		// the main subjects' turn (or until the lanes have nothing).
		var held *Job
		mainFirst := false
		keepHeld := time.NewTicker(in.ackWait / 3)
		defer keepHeld.Stop()
		defer func() {
			if held != nil {
				_ = held.Msg.Nak()
			}
		}()
		for ctx.Err() == nil {
			if !p.tryTake() {
				select {
				case <-ctx.Done():
				case <-p.freed:
				case <-keepHeld.C:
					if held != nil {
						_ = held.Msg.InProgress()
					}
				}
				continue
			}
			if mainFirst {
				mainFirst = false
				if held == nil {
					held = in.drainMain(ctx, runCfg, in.fetchWait(ctx, runCfg, fail, 0))
				}
				if held != nil {
					j := *held
					held = nil
					start(j, nil)
					continue
				}
			}
			if held == nil {
				held = in.drainMain(ctx, runCfg, in.fetchWait(ctx, runCfg, fail, 0))
			}
			if ln.serve(ctx, start) {
				mainFirst = true
				continue
			}
			if held != nil {
				j := *held
				held = nil
				start(j, nil)
				continue
			}
			pctx, stop := ln.interruptible(ctx)
			msg := in.fetchWait(pctx, runCfg, fail, ln.fetchWait(in.maxWait))
			stop()
			if held = in.drainMain(ctx, runCfg, msg); held == nil {
				p.put()
				continue
			}
			j := *held
			held = nil
			start(j, nil)
		}
	})
	loops.Go(func() {
		for ctx.Err() == nil {
			msg := in.fetch(ctx, attachCfg, fail)
			if msg == nil {
				continue
			}
			p.take()
			p.dispatched(1)
			wg.Go(func() {
				defer p.put()
				defer p.dispatched(-1)
				h.Attach(dctx, msg)
			})
		}
	})
	loops.Wait()
	stopDispatches(context.Cause(ctx))
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, ErrCannotConsume) {
		return err
	}
	return nil
}

// create creates or updates the consumer of cfg. A create that meets the
// deletion of the consumer it replaces still in progress is answered
// "consumer does not exist" (10149), or, while the old consumer's files
// are being removed, "error creating store for consumer" (10012), or
// (10012 again) the store's own error when the removal took the directory
// the new consumer's state file was being written in ("open
// .../obs/<durable>/o.dat.tmp: no such file or directory"): all seen on
// loaded 2-core machines, where they made a worker give up a consumer it
// could have created a moment later. It is tried again, createTries times
// in all.
func (in *Intake) create(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	var err error
	for try := range createTries {
		if try > 0 {
			clock.Sleep(ctx, time.Duration(try)*100*time.Millisecond)
		}
		var c jetstream.Consumer
		if c, err = in.js.CreateOrUpdateConsumer(ctx, in.names.JobsStream(), cfg); err == nil {
			return c, nil
		}
		if !deletionInProgress(err) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: create %s on %s: %w", ErrCannotConsume, cfg.Durable, in.names.JobsStream(), err)
}

// createTries bounds the creates of a consumer whose deletion is in progress.
const createTries = 5

// errCodeConsumerCreate is nats-server's general consumer create failure
// (JSConsumerCreateErrF), which carries errConsumerStoreFailed's text when
// the consumer's store could not be made.
const errCodeConsumerCreate jetstream.ErrorCode = 10012

// deletionInProgress reports whether a create failed only because the
// consumer it replaces is still being deleted.
func deletionInProgress(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	if apiErr.ErrorCode == jetstream.JSErrCodeConsumerDoesNotExist {
		return true
	}
	d := apiErr.Description
	return apiErr.ErrorCode == errCodeConsumerCreate && (strings.HasPrefix(d, "error creating store for consumer") ||
		strings.Contains(d, "/obs/") && strings.HasSuffix(d, ": no such file or directory"))
}

// AttachDurableName is the durable consumer of one node's attach jobs.
func AttachDurableName(node string) string { return "attach-" + node }

// fetch returns one job, or nil when none came (after a pause on errors).
// After an error it checks that the consumer still exists, recreates it
// if not, and calls fail when that is impossible.
func (in *Intake) fetch(ctx context.Context, cfg jetstream.ConsumerConfig, fail context.CancelCauseFunc) jetstream.Msg {
	return in.fetchWait(ctx, cfg, fail, in.maxWait)
}

// fetchWait is fetch waiting at most wait for a job (0: only one already
// waiting).
func (in *Intake) fetchWait(ctx context.Context, cfg jetstream.ConsumerConfig, fail context.CancelCauseFunc, wait time.Duration) jetstream.Msg {
	msg, err := in.pullOne(ctx, cfg.Durable, wait)
	if err == nil || ctx.Err() != nil {
		return msg
	}
	in.log.Warn().Err(err).Str("consumer", cfg.Durable).Msg("fetch job")
	if _, err := in.js.Consumer(ctx, in.names.JobsStream(), cfg.Durable); errors.Is(err, jetstream.ErrConsumerNotFound) {
		if _, err := in.create(ctx, cfg); err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return nil
		}
		in.log.Warn().Str("consumer", cfg.Durable).Msg("the jobs consumer was deleted; created it again")
	}
	clock.Sleep(ctx, time.Second)
	return nil
}

// drainMain handles msg, a job of the main subjects, and the jobs after
// it while the main consumer has any waiting: a keyed run or retry job
// is moved to its key's lane (the keys' turns are taken in their lanes,
// so none waits behind another key's backlog here), a job that cannot run
// is rejected, and the first other job (of no key, or a session's, which
// keeps its order on its own subject) is returned, decoded, for the
// caller to start or hold. Nil when the main subjects had no such job.
func (in *Intake) drainMain(ctx context.Context, cfg jetstream.ConsumerConfig, msg jetstream.Msg) *Job {
	next := func() jetstream.Msg { return in.fetchWait(ctx, cfg, func(error) {}, 0) }
	for ; msg != nil && ctx.Err() == nil; msg = next() {
		j, rejected := in.accept(ctx, msg)
		if rejected {
			continue
		}
		key, err := in.tenancy().KeyOf(j.Job)
		if err != nil {
			in.reject(ctx, msg, err)
			continue
		}
		j.Key = key
		if key != "" && msg.Subject() != in.names.SessionJobSubject(j.Job.Session) {
			in.moveToLane(ctx, msg, j, key)
			continue
		}
		return &j
	}
	if msg != nil { // stopping: given back
		_ = msg.Nak()
	}
	return nil
}

// Load is how many slots are free for a new run, and which profiles run
// their maxConcurrent here; all slots are free before Run.
func (in *Intake) Load(slots int) (free int, fullProfiles []string) {
	p := in.running.Load()
	if p == nil {
		return slots, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for prof, n := range p.byProfile {
		if m := in.cfg.Profiles[prof].MaxConcurrent; m > 0 && n >= m {
			fullProfiles = append(fullProfiles, prof)
		}
	}
	slices.Sort(fullProfiles)
	return max(0, p.limit-p.running), fullProfiles
}

// pool counts busy slots. New runs wait for a free one; attach jobs take
// one regardless, so busy may exceed the limit for a while. It also counts
// the new runs of each profile, for the profiles' maxConcurrent.
type pool struct {
	mu        sync.Mutex
	busy      int
	running   int // slots whose job was dispatched: busy less the fetch's
	limit     int
	freed     chan struct{}
	byProfile map[string]int
}

func newPool(limit int) *pool {
	return &pool{limit: limit, freed: make(chan struct{}, 1), byProfile: map[string]int{}}
}

// takeProfile counts a run of profile if fewer than max (0: no cap) run.
func (p *pool) takeProfile(profile string, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if max > 0 && p.byProfile[profile] >= max {
		return false
	}
	p.byProfile[profile]++
	return true
}

func (p *pool) putProfile(profile string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byProfile[profile]--; p.byProfile[profile] == 0 {
		delete(p.byProfile, profile)
	}
}

func (p *pool) dispatched(n int) {
	p.mu.Lock()
	p.running += n
	p.mu.Unlock()
}

func (p *pool) tryTake() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy >= p.limit {
		return false
	}
	p.busy++
	return true
}

func (p *pool) take() {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
}

func (p *pool) put() {
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// accept decodes and resolves msg; a job that cannot run is sent to the DLQ
// and acknowledged, and rejected is true.
func (in *Intake) accept(ctx context.Context, msg jetstream.Msg) (Job, bool) {
	lim := in.limits
	// Only workers may publish retries, which carry the baton.* labels.
	lim.ReservedLabels = msg.Subject() == in.names.RetryJobSubject()
	job, err := protocol.DecodeJob(msg.Data(), msg.Headers().Get(protocol.HeaderContentType), lim)
	if err == nil {
		var inv config.Invocation
		inv, err = in.cfg.Resolve(job, in.self)
		if err == nil {
			return Job{Job: job, Invocation: inv, Msg: msg}, false
		}
	}
	in.reject(ctx, msg, err)
	return Job{}, true
}

// reject moves msg to the DLQ with err as its reason, then acknowledges it
// on the jobs stream. A job that does not fit the server's max payload
// beside the DLQ's headers goes there truncated (HeaderTruncated, with the
// whole job's digest): every rejection is recorded. If the DLQ publish
// fails the job is left for redelivery, up to rejectDeliveries times;
// then it is terminated (Term removes it from the stream), logged and
// counted (WithOnDrop): a job is never redelivered for ever.
func (in *Intake) reject(ctx context.Context, msg jetstream.Msg, err error) {
	reason := protocol.ReasonOf(err)
	log := in.log.With().Str("reason", string(reason)).Logger()
	runID := protocol.PeekRunID(msg.Data(), msg.Headers().Get(protocol.HeaderContentType))
	if runID != "" {
		log = log.With().Str("run_id", runID).Logger()
	}
	dlq := in.dlqMsg(msg, runID, reason, err)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, perr := in.js.PublishMsg(pctx, dlq); perr != nil {
		md, _ := msg.Metadata()
		if md != nil && md.NumDelivered >= rejectDeliveries {
			log.Error().Err(perr).AnErr("rejection", err).Uint64("delivered", md.NumDelivered).Int("bytes", len(msg.Data())).
				Str("digest", digest(msg.Data())).Msg("cannot move job to the DLQ; dropped from the jobs stream (terminated)")
			if in.onDrop != nil {
				in.onDrop(reason)
			}
			if terr := msg.TermWithReason("baton: rejection could not be dead-lettered"); terr != nil {
				log.Warn().Err(terr).Msg("terminate job")
			}
			return
		}
		log.Error().Err(perr).AnErr("rejection", err).Msg("cannot move job to the DLQ; it will be redelivered")
		_ = msg.NakWithDelay(in.rejectWait)
		return
	}
	ev := log.Warn().Err(err)
	if n := dlq.Header.Get(protocol.HeaderTruncated); n != "" {
		ev = ev.Str("truncated_from", n)
	}
	ev.Msg("job rejected to the DLQ")
	if in.onReject != nil {
		in.onReject(reason)
	}
	// Ack, not Term: on a WorkQueue stream an ack is what removes the job.
	if aerr := msg.DoubleAck(pctx); aerr != nil {
		log.Warn().Err(aerr).Msg("ack rejected job")
	}
}

// rejectDeliveries bounds the deliveries of a job whose rejection cannot
// be published: a DLQ that refuses it five times, rejectWait apart,
// refuses it for good (a deleted stream, a permission, a full store).
const rejectDeliveries = 5

// dlqMsg is the DLQ entry of msg: the job, its run (runID, when known) and
// its provenance, the job cut so that the entry fits the server's max
// payload.
func (in *Intake) dlqMsg(msg jetstream.Msg, runID string, reason protocol.Reason, err error) *nats.Msg {
	dlq := nats.NewMsg(in.names.DLQSubject(reason))
	dlq.Data = msg.Data()
	if runID != "" {
		dlq.Header.Set(protocol.HeaderRunID, runID)
	}
	dlq.Header.Set(protocol.HeaderReason, string(reason))
	dlq.Header.Set(protocol.HeaderError, oneLine(err.Error()))
	dlq.Header.Set(protocol.HeaderOrigSubject, msg.Subject())
	if ct := msg.Headers().Get(protocol.HeaderContentType); ct != "" {
		dlq.Header.Set(protocol.HeaderContentType, ct)
	}
	if id := msg.Headers().Get(protocol.HeaderMsgID); id != "" {
		dlq.Header.Set(protocol.HeaderOrigMsgID, oneLine(id))
	}
	if md, mderr := msg.Metadata(); mderr == nil {
		// The stream sequence makes each DLQ entry unique, and a retried
		// rejection of the same delivery a duplicate.
		dlq.Header.Set(protocol.HeaderMsgID, fmt.Sprintf("dlq:%s:%d", msg.Subject(), md.Sequence.Stream))
	}
	limit := in.js.Conn().MaxPayload()
	if limit <= 0 || int64(headerBytes(dlq.Header)+len(dlq.Data)) <= limit {
		return dlq
	}
	dlq.Header.Set(protocol.HeaderTruncated, strconv.Itoa(len(dlq.Data)))
	dlq.Header.Set(protocol.HeaderOrigDigest, digest(dlq.Data))
	room := max(0, int(limit)-headerBytes(dlq.Header)-truncateSlack)
	dlq.Data = dlq.Data[:min(room, len(dlq.Data))]
	return dlq
}

// truncateSlack is room left in a truncated DLQ entry for what the client
// library may add to its headers.
const truncateSlack = 256

// headerBytes is the size of h on the wire ("NATS/1.0\r\n", a line per
// value, a blank line), which counts against the server's max payload.
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// digest names b in HeaderOrigDigest's form.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 1024 {
		s = s[:1024] + "…"
	}
	return s
}
