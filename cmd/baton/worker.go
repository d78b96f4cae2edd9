package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/natsurl"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

func newWorkerCmd(g *globals) *cobra.Command {
	var (
		lf           logFlags
		concurrency  int
		embedded     bool
		embeddedPort int
		grace        time.Duration
		ackWait      time.Duration
		metricsAddr  string
		runner       string
		serviceNATS  string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Consume run jobs and publish the runs this worker holds",
		Long: `worker pulls one job per free slot from the jobs stream, starts each run's
agent in a sandbox through a detached runner, and publishes every journal
line on the run's subjects. It provisions the streams and buckets it needs.
Stopping the worker never stops an agent.`,
		Example: `  # against a NATS server with JetStream
  baton worker --nats nats://127.0.0.1:4222 --config /etc/baton/baton.yaml

  # self-contained: an in-process NATS server storing under the state dir
  baton worker --embedded --state-dir /var/lib/baton --concurrency 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sandbox.HoldStops() // its runners need not re-exec to hold them
			log, err := lf.logger(os.Stderr)
			if err != nil {
				return err
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("concurrency") {
				cfg.Concurrency = concurrency
			}
			node, err := g.nodeID()
			if err != nil {
				return err
			}
			url := g.natsURL
			if embedded {
				s, err := startEmbedded(g.stateDir, embeddedPort)
				if err != nil {
					return err
				}
				defer s.Shutdown()
				url = s.ClientURL()
				log.Info().Str("url", url).Msg("embedded NATS server started")
			}
			opts := []worker.Option{worker.WithGrace(grace), worker.WithAckWait(ackWait)}
			if runner != "" {
				opts = append(opts, worker.WithRunner(runner))
			}
			if metricsAddr != "" {
				reg := prometheus.NewRegistry()
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				stop, err := serveMetrics(metricsAddr, reg, log)
				if err != nil {
					return err
				}
				defer stop()
				opts = append(opts, worker.WithMetrics(reg))
			}
			svcURL := serviceNATS
			if embedded {
				svcURL = url // the embedded server has no users to choose from
			}
			return runWorker(cmd.Context(), log, cfg, g.loadConfig, url, svcURL, node, g.stateDir, opts...)
		},
	}
	lf.register(cmd.Flags())
	cmd.Flags().IntVar(&concurrency, "concurrency", 4, "runs this worker holds at once (overrides the config file)")
	cmd.Flags().BoolVar(&embedded, "embedded", false, "start an in-process NATS server with JetStream under the state dir")
	cmd.Flags().IntVar(&embeddedPort, "embedded-port", 4222, "port of the embedded NATS server on 127.0.0.1")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "on SIGTERM, how long hand-off of the held runs may take")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://ADDR/metrics (e.g. 127.0.0.1:9464); off when empty")
	cmd.Flags().StringVar(&runner, "runner", "", "binary of the runner chain (default: "+worker.RunnerName+" beside baton if there, else baton itself)")
	cmd.Flags().StringVar(&serviceNATS, "service-nats", os.Getenv("BATON_SERVICE_NATS_URL"),
		"NATS URL with the credentials of the worker's service user (worker-svc in deploy/nats-auth.conf), which may publish only into inboxes: "+
			"the micro service (status, cancel, input, interrupt) answers from that connection ($BATON_SERVICE_NATS_URL sets the default; "+
			"empty: it answers on the main connection, guarded by the worker's own check alone)")
	cmd.Flags().DurationVar(&ackWait, "ack-wait", 60*time.Second, "AckWait of the jobs consumers: how soon a job taken by a dead worker is redelivered")
	return cmd
}

// errNATSClosed: the worker's NATS connection was closed for good (the
// server refused it for an error nats.go does not reconnect after, or its
// credentials twice).
var errNATSClosed = errors.New("the NATS connection was closed for good")

// runWorker connects (retrying forever) and serves until ctx ends, or
// until a connection of its is closed for good: then it returns an error
// (the process exits non-zero, so its supervisor starts a worker that
// connects anew) and leaves its runs' agents running for their next holder
// (I4). With svcURL, the micro service is served from a second connection
// there (worker.WithServiceConn).
func runWorker(ctx context.Context, log zerolog.Logger, cfg *config.Config, load func() (*config.Config, error), url, svcURL, node, stateDir string, opts ...worker.Option) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	dial := func(url, name string, log zerolog.Logger) (*nats.Conn, error) {
		nc, err := nats.Connect(url,
			nats.Name(name+" "+node),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250*time.Millisecond),
			nats.RetryOnFailedConnect(true),
			// Replies to the worker come on a prefix clients may not
			// subscribe to (deploy/nats-auth.conf).
			nats.CustomInboxPrefix(worker.InboxPrefix),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				log.Error().Err(err).Msg("NATS")
			}),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				log.Warn().Err(err).Msg("NATS disconnected")
			}),
			nats.ReconnectHandler(func(c *nats.Conn) {
				log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("NATS reconnected")
			}),
			nats.ClosedHandler(func(c *nats.Conn) {
				stop(fmt.Errorf("%w (%s): %w", errNATSClosed, name, cmp.Or(c.LastError(), nats.ErrConnectionClosed)))
			}),
		)
		if err != nil {
			return nil, fmt.Errorf("connect to NATS at %s: %w", natsurl.Redact(url), err)
		}
		return nc, nil
	}
	nc, err := dial(url, "baton-worker", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	if svcURL != "" {
		svc, err := dial(svcURL, "baton-worker-service", log.With().Str("conn", "service").Logger())
		if err != nil {
			return fmt.Errorf("--service-nats: %w", err)
		}
		defer svc.Close()
		opts = append(opts, worker.WithServiceConn(svc))
	}
	w, err := worker.New(nc, cfg, append([]worker.Option{worker.WithNode(node), worker.WithStateDir(stateDir), worker.WithLogger(log)}, opts...)...)
	if err != nil {
		return err
	}
	stopReload := reloadOnHUP(w, cfg, load, log)
	defer stopReload()
	err = w.Run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, errNATSClosed) {
		log.Error().Err(cause).Msg("exiting: a worker does not live on disconnected; its runs' agents keep running")
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// reloadOnHUP reads the configuration again at every SIGHUP and gives the
// worker its tenancy (the keys' limits and weights); a file that does not
// parse changes nothing, and keys only a restart applies are named.
func reloadOnHUP(w *worker.Worker, running *config.Config, load func() (*config.Config, error), log zerolog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
			}
			next, err := load()
			if err != nil {
				log.Error().Err(err).Msg("SIGHUP: the configuration does not load; nothing changed")
				continue
			}
			w.Reload(next.Tenancy)
			if keys := running.ChangedKeys(next); len(keys) > 0 {
				log.Warn().Strs("keys", keys).Msg("SIGHUP: these keys changed too; a restart applies them")
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// serveMetrics serves reg on addr until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving metrics")
	return func() { _ = srv.Close() }, nil
}
