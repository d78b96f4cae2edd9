package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/bench"
	"github.com/batonhq/baton/sandbox"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		rows    []string
		quick   bool
		keep    bool
		profile string
		density int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure baton against its performance targets and print one table",
		Long: `bench starts its own nats-server (embedded, loopback, file storage), runs
workers as separate processes of this binary and real sandboxed runs, and
prints one table: each row's target, what was measured, and pass or miss.
Every figure is a ratio against an anchor measured in the same run (JetStream
async publish, bwrap, pasta) or a median over repeated runs.

Rows:
` + bench.RowHelp() + `
The whole suite takes about three minutes on 2 cores. It
needs what the worker needs (user namespaces; run 'baton doctor') and
bwrap for the start row's anchor. docs/benchmarks.md explains each row.`,
		Example: `  baton bench
  baton bench --rows pipeline,latency
  baton bench --quick          # every row, small: checks the suite works
  baton bench --rows density --density-runs 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			began := time.Now()
			if profile != "" {
				stop, err := startCPUProfile(filepath.Join(profile, "bench.cpu.pprof"))
				if err != nil {
					return err
				}
				defer stop()
			}
			rep, err := bench.Run(cmd.Context(), bench.Config{Rows: rows, Quick: quick, Keep: keep,
				Progress: cmd.ErrOrStderr(), ProfileDir: profile, DensityRuns: density})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			if err := rep.Print(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n(%s; command: baton bench%s)\n", time.Since(began).Round(time.Second), flagsOf(rows, quick, density))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&rows, "rows", nil, "rows to run: "+strings.Join(bench.AllRows, ", ")+" (default all)")
	cmd.Flags().BoolVar(&quick, "quick", false, "small sizes, to check the suite works (its figures are not the benchmark's)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the suite's directory (journals, worker logs)")
	cmd.Flags().IntVar(&density, "density-runs", 0, "idle runs of the density row (default 200, 10 with --quick)")
	cmd.Flags().StringVar(&profile, "profile", "", "write CPU profiles to this directory: bench.cpu.pprof (this process: NATS, subscribers) and one per worker")
	cmd.AddCommand(newBenchAgentCmd(), newBenchEchoCmd(), newBenchWorkerCmd(g))
	return cmd
}

func flagsOf(rows []string, quick bool, density int) string {
	s := ""
	if len(rows) > 0 {
		s += " --rows " + strings.Join(rows, ",")
	}
	if quick {
		s += " --quick"
	}
	if density > 0 {
		s += fmt.Sprintf(" --density-runs %d", density)
	}
	return s
}

// newBenchAgentCmd is the stamping agent the suite's runs execute.
func newBenchAgentCmd() *cobra.Command {
	var o bench.AgentOptions
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Write stamped NDJSON lines at a steady rate (the suite's agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Agent(cmd.Context(), os.Stdout, o)
		},
	}
	cmd.Flags().Float64Var(&o.Rate, "rate", 0, "lines per second (0: as fast as possible)")
	cmd.Flags().IntVar(&o.Lines, "lines", 0, "lines to write")
	cmd.Flags().DurationVar(&o.Duration, "duration", 0, "write for this long instead of --lines")
	cmd.Flags().IntVar(&o.Size, "size", 200, "bytes per line, newline included")
	return cmd
}

// newBenchEchoCmd is the input row's agent: it answers each stdin line
// with the time it read it.
func newBenchEchoCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "echo",
		Short:  "Answer each stdin line with the time it was read (the input row's agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(*cobra.Command, []string) error { return bench.EchoAgent(os.Stdin, os.Stdout) },
	}
}

// newBenchWorkerCmd is a worker that also reports its goroutines on
// stdout, for the suite.
func newBenchWorkerCmd(g *globals) *cobra.Command {
	var (
		id          string
		concurrency int
		grace       time.Duration
		cpuprofile  string
		logLevel    string
	)
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run a worker that reports its goroutines (the suite's worker)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sandbox.HoldStops() // its runners need not re-exec to hold them
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if concurrency > 0 {
				cfg.Concurrency = concurrency
			}
			node, err := g.nodeID()
			if err != nil {
				return err
			}
			if cpuprofile != "" {
				stop, err := startCPUProfile(cpuprofile)
				if err != nil {
					return err
				}
				// The profile covers the worker's work, not its hand-off
				// (which may outlast the suite's patience).
				defer context.AfterFunc(cmd.Context(), stop)()
				defer stop()
			}
			lvl, err := zerolog.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level %q: %w", logLevel, err)
			}
			log := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
			return bench.Probe(cmd.Context(), os.Stdout, bench.ProbeOptions{
				URL: g.natsURL, StateDir: g.stateDir, Node: node, ID: id, Config: cfg, Grace: grace, Log: log,
			})
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "worker id")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "runs held at once (overrides the config file)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "hand-off grace on SIGTERM")
	cmd.Flags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the worker to this file")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level (the log goes to stderr)")
	return cmd
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}
