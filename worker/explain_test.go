package worker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/worker"
)

// TestRunNamesTheNATSCause: a worker whose NATS server runs no JetStream,
// or cannot be reached, says so and what to do, where it said "no
// responders available for request" and "context deadline exceeded".
func TestRunNamesTheNATSCause(t *testing.T) {
	noJS := testenv.RunServerWith(t, func(o *server.Options) { o.JetStream = false })
	// A port nothing listens on: one just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://u:secret@" + ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		name, url string
		want      error
		says      []string
	}{
		{"no JetStream", noJS.ClientURL(), worker.ErrNoJetStream, []string{noJS.ClientURL(), "-js"}},
		{"unreachable", closed, worker.ErrNATSUnreachable, []string{"cannot reach NATS at nats://u:xxxxx@" + ln.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(tc.url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			w, err := worker.New(nc, config.Default(), worker.WithStateDir(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			// No deadline on ctx, as baton worker runs it: the stream
			// set-up's requests then time out on their own, which is the
			// wait a person sees. The timer bounds it if they do not.
			ctx, cancel := context.WithCancel(context.Background())
			defer time.AfterFunc(30*time.Second, cancel).Stop()
			defer cancel()
			err = w.Run(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run: %v, want %v", err, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Run: %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("Run: %q shows the password", err)
			}
		})
	}
}
