package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/batonhq/baton/protocol"
)

// ErrNoJob means a run's record keeps no job to run again (Rerun).
var ErrNoJob = errors.New("client: the run's record keeps no job")

// Rerun submits run runID's job again as the new run newID and returns the
// job submitted: the job as the run's record keeps it, without the labels
// baton set on a retry's job (baton.retryOf, baton.attempt). A worker keeps
// every job in its run's record, unless it is over protocol.MaxKeptJob or
// half the server's max payload: such a run's error wraps ErrNoJob; a run without a
// record (never started, or expired), ErrNotFound.
func (c *Client) Rerun(ctx context.Context, runID, newID string) (protocol.Job, error) {
	if !protocol.ValidRunID(newID) {
		return protocol.Job{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, newID)
	}
	rec, err := c.Run(ctx, runID)
	if err != nil {
		return protocol.Job{}, err
	}
	if len(rec.Job) == 0 {
		return protocol.Job{}, fmt.Errorf("run %s cannot be re-run: %w (a worker keeps a job in its run's record only up to %d KiB, or half the server's max payload)",
			runID, ErrNoJob, protocol.MaxKeptJob>>10)
	}
	job, err := protocol.DecodeJob(rec.Job, protocol.ContentTypeJSON, protocol.Limits{ReservedLabels: true})
	if err != nil {
		return protocol.Job{}, fmt.Errorf("run %s: its kept job: %w", runID, err)
	}
	maps.DeleteFunc(job.Labels, func(k, _ string) bool { return strings.HasPrefix(k, protocol.ReservedLabelPrefix) })
	job.RunID = newID
	if err := c.Submit(ctx, job); err != nil {
		return protocol.Job{}, err
	}
	return job, nil
}
