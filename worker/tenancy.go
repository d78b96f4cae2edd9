package worker

import (
	"context"
	"errors"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/tenancy"
)

// Reload makes ten the tenancy (tenantLabel, keyConcurrency, keyWeights)
// from the next job on: a running worker's limits change without a
// restart.
func (w *Worker) Reload(ten config.Tenancy) {
	w.tenancy.Store(&ten)
	w.log.Info().Str("tenant_label", ten.TenantLabel).Int("key_concurrency", ten.KeyConcurrency.Default).
		Int("keys", len(ten.KeyConcurrency.Keys)).Msg("configuration reloaded: tenancy")
}

// Tenancy is the tenancy the worker applies now.
func (w *Worker) Tenancy() config.Tenancy { return *w.tenancy.Load() }

// runState tells the key slots' reaper what became of a run.
func (w *Worker) runState(ctx context.Context, runID string) (tenancy.RunState, error) {
	rec, _, err := w.runs.Get(ctx, runID)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return tenancy.RunNoRecord, nil
	case err != nil:
		return 0, err
	case rec.State.Terminal():
		return tenancy.RunEnded, nil
	}
	return tenancy.RunLive, nil
}
