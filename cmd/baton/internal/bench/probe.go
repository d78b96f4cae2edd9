package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/worker"
)

// ProbeOptions configure a probe worker.
type ProbeOptions struct {
	URL, StateDir, Node, ID string
	Config                  *config.Config
	Grace                   time.Duration
	Log                     zerolog.Logger
	// Every is how often a report line is written (default 200ms).
	Every time.Duration
}

// probeReport is one line a probe worker writes on its stdout.
type probeReport struct {
	ID         string `json:"id"`
	Ready      bool   `json:"ready"`
	Goroutines int    `json:"goroutines"`
	// Pools are the prestarted sandboxes the worker holds ready, by
	// profile (worker.PoolWaiting).
	Pools map[string]int `json:"pools,omitempty"`
}

// Probe runs a real worker, exactly as `baton worker` does, and reports
// on out, as one JSON line every o.Every, whether it is ready, how many
// goroutines it has and the sandboxes its pools hold ready: what the suite
// cannot read from /proc.
func Probe(ctx context.Context, out io.Writer, o ProbeOptions) error {
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	nc, err := nats.Connect(o.URL, nats.Name("baton-bench-worker "+o.ID),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return fmt.Errorf("bench: probe connect: %w", err)
	}
	defer nc.Close()
	reg := prometheus.NewRegistry()
	opts := []worker.Option{worker.WithNode(o.Node), worker.WithStateDir(o.StateDir), worker.WithLogger(o.Log), worker.WithMetrics(reg)}
	if o.ID != "" {
		opts = append(opts, worker.WithID(o.ID))
	}
	if o.Grace > 0 {
		opts = append(opts, worker.WithGrace(o.Grace))
	}
	w, err := worker.New(nc, o.Config, opts...)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	enc := json.NewEncoder(out)
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		rep := probeReport{ID: w.ID(), Goroutines: runtime.NumGoroutine()}
		if rep.Pools, err = worker.PoolWaiting(reg); err != nil {
			return fmt.Errorf("bench: probe report: %w", err)
		}
		select {
		case <-w.Ready():
			rep.Ready = true
		default:
		}
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("bench: probe report: %w", err)
		}
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-tick.C:
		}
	}
}
