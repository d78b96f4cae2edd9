package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// sessionExpiry deletes the sessions no run used for maxAge, with the
// checkpoints only they use (sessionsMaxAge). Every worker runs it, each
// pass at a random point of its period: a session two of them find is
// deleted once (the store's delete is a compare-and-set), the other is
// told it is gone.
type sessionExpiry struct {
	sessions interface {
		List(ctx context.Context) ([]kv.SessionRecord, error)
		Delete(ctx context.Context, id string) error
	}
	maxAge time.Duration
	log    zerolog.Logger
	clock  clock.Clock
}

// every is the period of its passes: a tenth of maxAge, within a minute
// and an hour.
func (e sessionExpiry) every() time.Duration { return min(max(e.maxAge/10, time.Minute), time.Hour) }

func (e sessionExpiry) run(ctx context.Context) {
	for e.clock.Sleep(ctx, e.every()/2+rand.N(e.every())) {
		e.pass(ctx)
	}
}

// expired are the sessions of recs unused since before cut, with no
// live run.
func expired(recs []kv.SessionRecord, cut time.Time) []string {
	var out []string
	for _, r := range recs {
		if r.Live == "" && !r.Deleted && r.UpdatedAt.Before(cut) {
			out = append(out, r.ID)
		}
	}
	return out
}

func (e sessionExpiry) pass(ctx context.Context) {
	recs, err := e.sessions.List(ctx)
	if err != nil {
		e.log.Warn().Err(err).Msg("list sessions to expire")
		return
	}
	for _, id := range expired(recs, e.clock.Now().Add(-e.maxAge)) {
		switch err := e.sessions.Delete(ctx, id); {
		case err == nil:
			e.log.Info().Str("session", id).Dur("max_age", e.maxAge).Msg("session expired: deleted with its checkpoints")
		case errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrLive):
			// Another worker deleted it, or a run of it started meanwhile.
		default:
			e.log.Warn().Err(err).Str("session", id).Msg("delete an expired session")
		}
	}
}
