package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

// DurableName is the shared durable consumer of new-run jobs.
const DurableName = "workers"

// Job is a decoded, resolved job handed to the dispatcher.
type Job struct {
	Job        protocol.Job
	Invocation config.Invocation
	Msg        jetstream.Msg
}

// Dispatch runs one job. It owns the job's message (it must Ack, Nak or
// Reject it) and holds its slot until it returns.
type Dispatch func(ctx context.Context, j Job)

// Intake pulls jobs, one per free slot.
type Intake struct {
	js      jetstream.JetStream
	names   protocol.Names
	cfg     *config.Config
	self    string
	limits  protocol.Limits
	log     zerolog.Logger
	ackWait time.Duration
	maxWait time.Duration
}

// Option configures an Intake.
type Option func(*Intake)

// WithLogger sets the logger.
func WithLogger(l zerolog.Logger) Option { return func(in *Intake) { in.log = l } }

// WithSelf is the baton binary path that replaces "{baton}" in profiles.
func WithSelf(path string) Option { return func(in *Intake) { in.self = path } }

// WithAckWait sets the consumer's AckWait (default 60s).
func WithAckWait(d time.Duration) Option { return func(in *Intake) { in.ackWait = d } }

// WithFetchWait bounds one idle fetch (default 5s); shorter makes shutdown
// of an idle worker quicker.
func WithFetchWait(d time.Duration) Option { return func(in *Intake) { in.maxWait = d } }

// New returns an Intake for the jobs stream named by names.
func New(js jetstream.JetStream, names protocol.Names, cfg *config.Config, opts ...Option) *Intake {
	in := &Intake{
		js: js, names: names, cfg: cfg,
		log:     zerolog.Nop(),
		ackWait: 60 * time.Second,
		maxWait: 5 * time.Second,
		limits:  protocol.Limits{MaxBytes: cfg.MaxJobBytes},
	}
	for _, o := range opts {
		o(in)
	}
	return in
}

// Run fetches jobs while slots are free and ctx lives. Each accepted job is
// dispatched in its own goroutine holding one slot; Run returns after ctx
// ends and every dispatch has returned.
func (in *Intake) Run(ctx context.Context, slots int, dispatch Dispatch) error {
	cons, err := in.js.CreateOrUpdateConsumer(ctx, in.names.JobsStream(), jetstream.ConsumerConfig{
		Durable:       DurableName,
		Description:   "baton workers: new runs",
		FilterSubject: in.names.RunJobSubject(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       in.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
	})
	if err != nil {
		return fmt.Errorf("consumer: create %s: %w", DurableName, err)
	}
	free := make(chan struct{}, slots)
	for range slots {
		free <- struct{}{}
	}
	done := make(chan struct{})
	running := 0
	defer func() {
		for ; running > 0; running-- {
			<-done
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			running--
			free <- struct{}{}
			continue
		case <-free:
		}
		msg, err := in.fetchOne(ctx, cons)
		if err != nil || msg == nil {
			free <- struct{}{}
			if err != nil && ctx.Err() == nil {
				in.log.Warn().Err(err).Msg("fetch job")
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		j, rejected := in.accept(ctx, msg)
		if rejected {
			free <- struct{}{}
			continue
		}
		running++
		go func() {
			defer func() { done <- struct{}{} }()
			dispatch(ctx, j)
		}()
	}
}

// fetchOne asks the server for exactly one job; nil, nil when none came.
func (in *Intake) fetchOne(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	wait := in.maxWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), 10*time.Millisecond)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case msg, ok := <-batch.Messages():
			if !ok {
				if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
					return nil, err
				}
				return nil, nil
			}
			return msg, nil
		case <-ctx.Done():
			// A job delivered now is not lost: it is redelivered after AckWait.
			return nil, nil
		}
	}
}

// accept decodes and resolves msg; a job that cannot run is sent to the DLQ
// and acknowledged, and rejected is true.
func (in *Intake) accept(ctx context.Context, msg jetstream.Msg) (Job, bool) {
	job, err := protocol.DecodeJob(msg.Data(), msg.Headers().Get(protocol.HeaderContentType), in.limits)
	if err == nil {
		var inv config.Invocation
		inv, err = in.cfg.Resolve(job, in.self)
		if err == nil {
			return Job{Job: job, Invocation: inv, Msg: msg}, false
		}
	}
	in.Reject(ctx, msg, err)
	return Job{}, true
}

// Reject moves msg to the DLQ with err as its reason, then acknowledges it
// on the jobs stream. If the DLQ publish fails the job is left for redelivery:
// nothing is lost.
func (in *Intake) Reject(ctx context.Context, msg jetstream.Msg, err error) {
	reason := protocol.ReasonOf(err)
	log := in.log.With().Str("reason", string(reason)).Logger()
	if runID := peekRunID(msg.Data()); runID != "" {
		log = log.With().Str("run_id", runID).Logger()
	}
	dlq := nats.NewMsg(in.names.DLQSubject(reason))
	dlq.Data = msg.Data()
	dlq.Header.Set(protocol.HeaderReason, string(reason))
	dlq.Header.Set(protocol.HeaderError, oneLine(err.Error()))
	dlq.Header.Set(protocol.HeaderOrigSubject, msg.Subject())
	if ct := msg.Headers().Get(protocol.HeaderContentType); ct != "" {
		dlq.Header.Set(protocol.HeaderContentType, ct)
	}
	if id := msg.Headers().Get(protocol.HeaderMsgID); id != "" {
		dlq.Header.Set(protocol.HeaderOrigMsgID, id)
	}
	if md, mderr := msg.Metadata(); mderr == nil {
		// The stream sequence makes each DLQ entry unique, and a retried
		// rejection of the same delivery a duplicate.
		dlq.Header.Set(protocol.HeaderMsgID, fmt.Sprintf("dlq:%s:%d", msg.Subject(), md.Sequence.Stream))
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, perr := in.js.PublishMsg(pctx, dlq); perr != nil {
		log.Error().Err(perr).AnErr("rejection", err).Msg("cannot move job to the DLQ; it will be redelivered")
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	log.Warn().Err(err).Msg("job rejected to the DLQ")
	// Ack, not Term: on a WorkQueue stream an ack is what removes the job.
	if aerr := msg.DoubleAck(pctx); aerr != nil {
		log.Warn().Err(aerr).Msg("ack rejected job")
	}
}

// peekRunID finds a plausible runId in a payload that may not decode, for
// logging only.
func peekRunID(b []byte) string {
	i := strings.Index(string(b[:min(len(b), 4096)]), `"runId"`)
	if i < 0 {
		return ""
	}
	rest := string(b[i+7 : min(len(b), i+7+200)])
	rest = strings.TrimLeft(rest, " \t\r\n:")
	if !strings.HasPrefix(rest, `"`) {
		return ""
	}
	id, _, ok := strings.Cut(rest[1:], `"`)
	if !ok || !protocol.ValidRunID(id) {
		return ""
	}
	return id
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 1024 {
		s = s[:1024] + "…"
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
