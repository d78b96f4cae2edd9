package worker

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// captureTimeout bounds one run's capture: a 256 MiB diff and files, put
// to a loaded server, take seconds.
const captureTimeout = 5 * time.Minute

// errCaptureTimeout ends a capture that took longer than captureTimeout.
var errCaptureTimeout = errors.New("the capture took longer than " + captureTimeout.String())

// captureOutputs stores what r's profile asks of its workspace in the
// outputs bucket and lists it on st, the terminal status about to be
// published. It reports whether the status may go out: false only when
// this worker cannot finish the run (it stops, its lease is lost, its
// connection is down), and then the run is left to a successor (a hand-off
// when the worker stops, else the release of a stopped lease one TTL
// later), which captures again: the same names, the same objects. A
// capture that fails for the workspace's own reasons (a limit, its time,
// what the store refuses of it) would fail for the successor too: the run
// ends, st.OutputsError says why.
func (w *Worker) captureOutputs(ctx context.Context, r *run, st *protocol.Status) bool {
	spec, err := sandbox.ReadSpec(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true // never prepared here: nothing was seeded nor written
	}
	if err != nil {
		st.OutputsError = "cannot read the run's spec: " + err.Error()
		return true
	}
	pol := outputs.Policy{Diff: spec.Outputs.Diff, Files: spec.Outputs.Files, Within: spec.Outputs.Within, MaxBytes: int64(spec.Limits.Outputs)}
	if pol.Empty() {
		return true
	}
	if spec.Git != nil {
		pol.SkipTop = []string{".git"}
	}
	cctx, cancel := w.endingContext(ctx, r, captureTimeout, errCaptureTimeout)
	defer cancel()
	start := time.Now()
	// A baseline that cannot be laid out (its archive expired or replaced
	// since) costs the diff, not the files.
	var baseErr string
	base, done := outputs.FilesBaseline(nil), func() {}
	if pol.Diff {
		b, d, err := w.baseline(cctx, r, spec)
		switch {
		case err == nil:
			base, done = b, d
		case cctx.Err() != nil && ctx.Err() != nil:
			r.log.Warn().Err(err).Msg("stopped while laying out the diff's baseline; handing the run off")
			w.handoff(r)
			return false
		case r.lease.Err() != nil || w.disconnected(err):
			// Not the baseline's fault: a successor lays it out again (a
			// lease lost on a loaded machine once ended a run with "no
			// diff: ... context canceled").
			r.log.Error().Err(err).Msg("lay out the diff's baseline; a successor will capture the outputs")
			r.lease.Stop()
			return false
		default:
			baseErr, pol.Diff = "no diff: its baseline: "+err.Error(), false
		}
	}
	defer done()
	res, err := outputs.Capture(cctx, w.outputs, r.id, r.dir.Workspace(), base, pol)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.log.Warn().Err(err).Msg("stopped while capturing outputs; handing the run off")
		w.handoff(r)
		return false
	case r.lease.Err() != nil || w.disconnected(err):
		r.log.Error().Err(err).Msg("capture outputs; a successor will capture them again")
		r.lease.Stop()
		return false
	default:
		if errors.Is(context.Cause(cctx), errCaptureTimeout) {
			err = errCaptureTimeout
		}
		// What was stored before is listed.
		res.Error = strings.TrimPrefix(res.Error+"; not stored: "+err.Error(), "; ")
	}
	if baseErr != "" {
		res.Error = strings.TrimSuffix(baseErr+"; "+res.Error, "; ")
	}
	st.Outputs, st.OutputsError, st.OutputsNotes = res.Outputs, res.Error, res.Notes
	ev := r.log.Info()
	if res.Error != "" {
		ev = r.log.Warn().Str("outputs_error", res.Error)
	}
	ev.Int("objects", len(res.Outputs)).Dur("took", time.Since(start)).Msg("outputs captured")
	return true
}

// endingContext bounds work done as r ends (its outputs, its checkpoint)
// by limit, whose end has cause: it goes on past ctx's end, for the
// worker's grace, and ends when r's lease is lost (its status could not
// go out). cancel releases it.
func (w *Worker) endingContext(ctx context.Context, r *run, limit time.Duration, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), limit, cause)
	stopGrace := context.AfterFunc(ctx, func() {
		select {
		case <-time.After(w.grace):
			cancel()
		case <-cctx.Done():
		}
	})
	go func() {
		select {
		case <-r.lease.Lost():
			cancel()
		case <-cctx.Done():
		}
	}()
	return cctx, func() { stopGrace(); cancel() }
}

// disconnected reports whether a store failed for want of the server (the
// worker's connection, or JetStream not answering): a successor may not
// meet it.
func (w *Worker) disconnected(err error) bool {
	return !w.nc.IsConnected() || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrNoHeartbeat)
}

// transient reports whether a write that failed with err may succeed
// when tried again: the server away (disconnected), the try's own
// deadline, or JetStream briefly unavailable (503, a leader election).
// Not a record that cannot be decoded, nor a permission refused.
func (w *Worker) transient(err error) bool {
	var apiErr *jetstream.APIError
	return w.disconnected(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &apiErr) && apiErr.Code == 503
}
