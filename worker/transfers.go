package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A worker moves bulk bytes, a session's checkpoint or a run's outputs,
// on a connection of their own: an object put queues its chunks on its
// connection's socket, hundreds of KiB ahead of anything sent after, and
// on the main connection the liveness renewals queued behind a 48 MB
// checkpoint missed their 2.5 s bound on a loaded machine, every try:
// the lease was lost, the checkpoint cancelled and tried again, on and
// on (TestSessionCheckpointSurvivesSIGKILL, in CI).

// openTransfers dials the transfers connection with the main one's
// options (servers, credentials, TLS) and reopens the object stores on
// it. Without it (the dial failed) they stay on the main connection,
// which works, only with that risk: it is said.
func (w *Worker) openTransfers(ctx context.Context) {
	opts := w.nc.Opts
	opts.Name += " (transfers)"
	// The main connection's handlers speak for the worker's connection.
	opts.DisconnectedErrCB, opts.ReconnectedCB, opts.ClosedCB, opts.AsyncErrorCB = nil, nil, nil, nil
	opts.DiscoveredServersCB, opts.LameDuckModeHandler, opts.ConnectedCB = nil, nil, nil
	// Bounded: a worker's start, which a run's recovery waits for, never
	// waits long on it.
	ctx, cancel := context.WithTimeout(ctx, transfersOpenTimeout)
	defer cancel()
	nc, err := opts.Connect()
	if err == nil {
		if err = w.reopenObjectStores(ctx, nc); err != nil {
			nc.Close()
		} else {
			w.transfers = nc
		}
	}
	if err != nil {
		w.log.Warn().Err(err).Msg("no connection of its own for checkpoints and outputs: they share the main one, where a large one can delay lease renewals")
	}
}

// transfersOpenTimeout bounds openTransfers.
const transfersOpenTimeout = 2 * time.Second

func (w *Worker) reopenObjectStores(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	outs, err := js.ObjectStore(ctx, w.names.OutputsBucket())
	if err != nil {
		return fmt.Errorf("open %s on the transfers connection: %w", w.names.OutputsBucket(), err)
	}
	cps, err := js.ObjectStore(ctx, w.names.CheckpointsBucket())
	if err != nil {
		return fmt.Errorf("open %s on the transfers connection: %w", w.names.CheckpointsBucket(), err)
	}
	w.outputs, w.checkpoints = outs, cps
	return nil
}
