package worker

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/natsurl"
)

var (
	// ErrNoJetStream: the NATS server a worker connected to does not run
	// JetStream, which holds every job, event and record.
	ErrNoJetStream = errors.New("worker: JetStream is not enabled")
	// ErrNATSUnreachable: a worker could not reach its NATS server to set up
	// its streams.
	ErrNATSUnreachable = errors.New("worker: cannot reach NATS")
)

// explainNATS names the cause of err, which setting up the streams on nc
// returned, when it is one a person can fix from the message alone: the
// client library's own words ("no responders available for request",
// "context deadline exceeded") name neither the server nor the fix.
func explainNATS(nc *nats.Conn, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders) && nc.IsConnected():
		return fmt.Errorf("%w on the NATS server at %s: start nats-server with -js (or enable JetStream for this account): %w",
			ErrNoJetStream, nc.ConnectedUrlRedacted(), err)
	case !nc.IsConnected():
		cause := err
		if last := nc.LastError(); last != nil {
			cause = last
		}
		return fmt.Errorf("%w at %s: %w", ErrNATSUnreachable, serverList(nc), cause)
	}
	return err
}

// serverList is the servers nc tries, as a person gave them but for any
// password or token.
func serverList(nc *nats.Conn) string {
	if urls := natsurl.Redact(append([]string{nc.Opts.Url}, nc.Opts.Servers...)...); urls != "" {
		return urls
	}
	return nats.DefaultURL
}
