package consumer

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A Disposition is what becomes of one job message: acknowledged,
// redelivered after a delay, rejected to the DLQ with its reason, or left
// to the server's AckWait. A handler decides exactly one per message and
// Settle applies it, the only place a job message is settled.
type Disposition struct {
	kind  dispKind
	delay time.Duration
	err   error // a rejection's reason; why a nak was needed, if it failed
	why   string
}

type dispKind uint8

const (
	dispAck dispKind = iota + 1
	dispNak
	dispReject
	dispLeave
)

// Ack acknowledges the message (the job is done with, whatever became of
// its run); why is logged at debug level.
func Ack(why string) Disposition { return Disposition{kind: dispAck, why: why} }

// Nak has the job redelivered after delay. With an error, the nak is
// logged as a warning ("why: the job will be redelivered").
func Nak(delay time.Duration, why string, err error) Disposition {
	return Disposition{kind: dispNak, delay: delay, why: why, err: err}
}

// Reject moves the job to the DLQ with err's reason (Intake.Reject).
func Reject(err error) Disposition { return Disposition{kind: dispReject, err: err} }

// Leave settles nothing: the server redelivers the job after AckWait. Only
// for a job whose run another worker took over meanwhile, which that worker
// settles; why is logged as a warning.
func Leave(why string) Disposition { return Disposition{kind: dispLeave, why: why} }

// String is d for logs and tests: "ack", "nak 1s", "reject", "leave".
func (d Disposition) String() string {
	switch d.kind {
	case dispAck:
		return "ack"
	case dispNak:
		return "nak " + d.delay.String()
	case dispReject:
		return "reject"
	case dispLeave:
		return "leave"
	}
	return "none"
}

// settleTimeout bounds an ack or nak, which is sent even when the handler's
// context has ended (a stopping worker): a job settled late is redelivered
// after AckWait for nothing.
const settleTimeout = 2 * time.Second

// Settle applies d to msg. An ack is a double ack, so a job acknowledged
// is known not to come back.
func (in *Intake) Settle(ctx context.Context, msg jetstream.Msg, d Disposition, log zerolog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch d.kind {
	case dispAck:
		log.Debug().Str("why", d.why).Msg("job acknowledged")
		if err := msg.DoubleAck(sctx); err != nil {
			log.Warn().Err(err).Str("why", d.why).Msg("ack job")
		}
	case dispNak:
		if d.err != nil {
			log.Warn().Err(d.err).Msg(d.why + "; the job will be redelivered")
		} else {
			log.Debug().Dur("delay", d.delay).Msg(d.why + "; the job will be redelivered")
		}
		if err := msg.NakWithDelay(d.delay); err != nil {
			log.Warn().Err(err).Msg("nak job")
		}
	case dispReject:
		in.reject(ctx, msg, d.err)
	case dispLeave:
		log.Warn().Msg(d.why + "; the job is left to its redelivery")
	default:
		// A handler's bug: said loudly, and the job comes back after AckWait.
		log.Error().Msg("a job without a disposition; it is left to its redelivery")
	}
}
