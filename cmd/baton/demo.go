package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// demoInput is the demo run's default input: the task the fake agent's
// session carries out.
const demoInput = "TestHandleUpload fails: an upload with a malformed body should get a 400, not a 500. Please fix it."

// demoFollowUp is what the demo sends when the agent waits after its first
// turn: the second turn's request, with end of input.
const demoFollowUp = "Add a regression test for the malformed body."

// demoTurnsProfile is the profile the demo adds to its own worker's
// configuration: the built-in demo agent, interactive, so the run shows a
// second turn. The built-in demo profile stays as it is, a run that ends
// by itself.
const demoTurnsProfile = "demo-turns"

// demoTurns is that profile: the fake agent's story, then a follow-up turn
// read from stdin, which stays open; each result line ends a turn. A
// quicker pace than the built-in profile's keeps the two turns within
// about 8 s.
func demoTurns() config.Profile {
	p := config.Default().Profiles[config.DemoProfile]
	p.Command = append(slices.Clone(p.Command), "--follow-up", "--rate", "35")
	p.Stdin = config.StdinStream
	p.TurnEnd = &config.TurnEnd{Field: "type", Equals: "result"}
	p.IdleTimeout = time.Minute
	// What the fake agent needs, and little more: the node's disk budget
	// (diskBudget) counts a run's limits, so the demo starts on a machine
	// with a few hundred MiB free, not the defaults' 5 GiB.
	p.Limits.Disk, p.Limits.Output = 64<<20, 16<<20
	return p
}

// errWaiting stops followUp's watch at the run's first turn end.
var errWaiting = errors.New("the agent waits for input")

// followUp sends text, as a stream-json user message with end of input, once
// runID first waits for input. It returns nil without sending if the run
// ends first, or ctx's error.
func followUp(ctx context.Context, c *client.Client, runID, text string) error {
	_, err := c.Watch(ctx, runID, func(ev client.Event) error {
		if ev.Kind == protocol.KindStatus && ev.Status.Status == protocol.StatusWaiting {
			return errWaiting
		}
		return nil
	})
	if !errors.Is(err, errWaiting) {
		return err
	}
	_, err = c.Send(ctx, runID, client.StreamJSONUserMessage(text), client.WithEOF())
	return err
}

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
of the built-in demo agent (baton's fake agent), then streams the run to
the terminal until it ends, exactly as 'baton watch' would. The run keeps
its stdin open: when the agent's first turn ends, the demo sends a
follow-up (as 'baton send --stream-json --eof' would) and the agent
answers it in a second turn. Nothing listens
beyond 127.0.0.1, and the state is removed afterwards unless --keep.`,
		Example: `  baton demo
  baton demo --input "Refactor the parser" --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sandbox.HoldStops() // its runners need not re-exec to hold them
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
			if _, ok := cfg.Profiles[demoTurnsProfile]; ok {
				return fmt.Errorf("the configuration defines a profile %q, which baton demo adds itself", demoTurnsProfile)
			}
			cfg.Profiles[demoTurnsProfile] = demoTurns()
			if err := cfg.Validate(); err != nil {
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
			// Its embedded server has no users: the service answers there.
			w, err := worker.New(nc, cfg, worker.WithNode("demo"), worker.WithStateDir(dir), worker.WithLogger(log), worker.WithServiceConn(nc))
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
			c, err := client.New(js, names)
			if err != nil {
				return err
			}
			sess := &session{c: c, js: js, close: func() {}}
			runID := "demo-" + protocol.NewRunID()[len("run-"):]
			fmt.Fprintf(out, "baton demo: NATS %s, worker %s, state %s\n", s.ClientURL(), w.ID(), dir)
			job := protocol.Job{RunID: runID, Profile: demoTurnsProfile, Input: string(client.StreamJSONUserMessage(input)) + "\n"}
			if err := sess.c.Submit(ctx, job); err != nil {
				return err
			}
			fmt.Fprintf(out, "submitted run %s (profile %s); streaming %s\n\n", runID, demoTurnsProfile, names.RunFilter(runID))
			fctx, stopFollowUp := context.WithCancel(ctx)
			ferr := make(chan error, 1)
			go func() { ferr <- followUp(fctx, sess.c, runID, demoFollowUp) }()
			watchErr := sess.watchSince(ctx, runID, time.Now().Add(-time.Minute), job.Input, false, out, errOut)
			stopFollowUp()
			if err := <-ferr; err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(errOut, "baton demo: send the follow-up: %v\n", err)
				if watchErr == nil {
					watchErr = exitCodeError(1)
				}
			}
			journal := filepath.Join(dir, "runs", runID, "journal.ndjson")
			fmt.Fprint(out, demoNext)
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

// demoNext is what the demo prints after its run: where to go from here.
// The files it names are in the repository (TestDemoNextNamesFiles).
const demoNext = `
What next:
  docs/quickstart.md        a real setup, step by step: nats-server, a worker, submit, watch, the console
  baton worker --nats nats://HOST:4222 --config deploy/baton.yaml   a worker against your NATS (JetStream on)
  nats pub baton.jobs.run '{"runId":"r1","profile":"demo","input":"hi"}' -H Nats-Msg-Id:r1
  baton watch r1            replay and follow a run (or: nats sub 'baton.runs.r1.>')
  baton doctor              check this machine's sandbox prerequisites
  README.md                 the protocol, configuration and deployment
`

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
