package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// demoInput is the demo run's default input: the task the fake agent's
// session carries out.
const demoInput = "TestHandleUpload fails: an upload with a malformed body should get a 400, not a 500. Please fix it."

func newDemoCmd(g *globals) *cobra.Command {
	var (
		keep  bool
		input string
		lf    logFlags
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run baton end to end on an embedded NATS server and stream a demo run",
		Long: `demo starts an in-process NATS server with JetStream, a worker, and one run
of the built-in demo profile (baton's fake agent), then streams the run to
the terminal until it ends, exactly as 'baton watch' would. Nothing listens
beyond 127.0.0.1, and the state is removed afterwards unless --keep.`,
		Example: `  baton demo
  baton demo --input "Refactor the parser" --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			dir := g.stateDir
			if !cmd.Flags().Changed("state-dir") {
				d, err := os.MkdirTemp("", "baton-demo-")
				if err != nil {
					return err
				}
				dir = d
				if !keep {
					defer removeDemoState(dir)
				}
			}
			// The sandbox user of a root worker must reach its workspace.
			if err := os.MkdirAll(dir, 0o711); err != nil {
				return err
			}
			if err := os.Chmod(dir, 0o711); err != nil {
				return err
			}
			log, err := lf.logger(errOut)
			if err != nil {
				return err
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			s, err := startEmbedded(dir, -1)
			if err != nil {
				return err
			}
			defer s.Shutdown()
			nc, err := nats.Connect(s.ClientURL(), nats.Name("baton-demo"))
			if err != nil {
				return err
			}
			defer nc.Close()
			w, err := worker.New(nc, cfg, worker.WithNode("demo"), worker.WithStateDir(dir), worker.WithLogger(log))
			if err != nil {
				return err
			}
			wctx, stopWorker := context.WithCancel(ctx)
			werr := make(chan error, 1)
			go func() { werr <- w.Run(wctx) }()
			defer func() { stopWorker(); <-werr }()
			select {
			case <-w.Ready():
			case err := <-werr:
				werr <- err
				return fmt.Errorf("worker: %w", err)
			case <-time.After(30 * time.Second):
				return fmt.Errorf("worker not ready after 30s")
			}
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			names, err := protocol.NewNames(cfg.Prefix)
			if err != nil {
				return err
			}
			sess := &session{c: client.New(js, names), js: js, close: func() {}}
			runID := "demo-" + newRunID()[len("run-"):]
			fmt.Fprintf(out, "baton demo: NATS %s, worker %s, state %s\n", s.ClientURL(), w.ID(), dir)
			if err := sess.c.Submit(ctx, protocol.Job{RunID: runID, Profile: "demo", Input: input}); err != nil {
				return err
			}
			fmt.Fprintf(out, "submitted run %s (profile demo); streaming %s\n\n", runID, names.RunFilter(runID))
			watchErr := sess.watch(ctx, runID, false, out, errOut)
			journal := filepath.Join(dir, "runs", runID, "journal.ndjson")
			fmt.Fprintf(out, `
What next:
  baton worker --nats nats://HOST:4222 --config baton.yaml   run workers against your NATS (JetStream on)
  nats pub baton.jobs.run '{"runId":"r1","profile":"demo","input":"hi"}' -H Nats-Msg-Id:r1
  baton watch r1            replay and follow a run (or: nats sub 'baton.runs.r1.>')
  baton doctor              check this machine's sandbox prerequisites
  README.md                 the protocol, configuration and deployment
`)
			if keep || cmd.Flags().Changed("state-dir") {
				fmt.Fprintf(out, "The run's journal is kept at %s\n", journal)
			}
			return watchErr
		},
	}
	lf.register(cmd.Flags())
	cmd.Flags().Lookup("log-level").DefValue = "warn"
	_ = cmd.Flags().Set("log-level", "warn")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the demo's state directory (journal, NATS data)")
	cmd.Flags().StringVar(&input, "input", demoInput, "the demo agent's input")
	return cmd
}

// removeDemoState removes the demo's state directory once its runners have
// let their runs go (briefly waited for), releasing each run's workspace
// first: a root worker's is a mounted filesystem, whose loop device would
// otherwise outlive the demo.
func removeDemoState(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _ = worker.Prune(context.Background(), dir, time.Nanosecond)
		left, _ := os.ReadDir(filepath.Join(dir, "runs"))
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = os.RemoveAll(dir)
}
