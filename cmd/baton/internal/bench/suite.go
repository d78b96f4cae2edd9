package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sys/unix"
)

// Row names, as --rows takes them.
const (
	RowPipeline   = "pipeline"
	RowPipeline20 = "pipeline-20"
	RowLatency    = "latency"
	RowInput      = "input"
	RowStart      = "start"
	RowHandoff    = "handoff"
	RowScale      = "scale"
	RowInputScale = "input-scale"
	RowInputBatch = "input-batch"
	RowHistory    = "history"
	RowConsole    = "console"
	RowDensity    = "density"
	RowOutputs    = "outputs"
	RowSessions   = "sessions"
	RowFairness   = "fairness"
)

// row is one row of the suite: its name, what it measures (for the
// command's help) and how it runs.
type row struct {
	name, about string
	run         func(e *env, ctx context.Context, sz sizes) []Result
}

// rows lists every row, in the order they run and print.
var rows = []row{
	{RowPipeline, "throughput of one run", (*env).pipeline},
	{RowPipeline20, "throughput of 20 runs at once on one worker, against 20 async publishers", (*env).pipelineMany},
	{RowLatency, "1,000 lines/s, write to subscriber", (*env).latency},
	{RowInput, "send to the agent's stdin at 100 messages/s, and the first input of a run", (*env).input},
	{RowStart, "job to first event, network none and with an allowlist", (*env).start},
	{RowHandoff, "SIGTERM and SIGKILL of the holder; gives the hand-off and crash rows", (*env).handoff},
	{RowScale, "200 runs on one worker", (*env).scale},
	{RowInputScale, "the input row on the scale row's worker, beside its 200 runs at nice 0",
		func(e *env, ctx context.Context, sz sizes) []Result {
			return e.inputScale(ctx, sz, RowInputScale, "stamp")
		}},
	{RowInputBatch, "the same, the 200 runs' profile at nice 19",
		func(e *env, ctx context.Context, sz sizes) []Result {
			return e.inputScale(ctx, sz, RowInputBatch, "stamp-batch")
		}},
	{RowHistory, "worker start and a reaper pass with 100,000 finished run records against none", (*env).history},
	{RowConsole, "a run's live view in the web console against a plain NATS subscription, and the runs list with 10,000 records", (*env).console},
	{RowDensity, "200 idle runs on one worker: the CPU and memory an idle run costs", (*env).density},
	{RowOutputs, "capture of a 100 MiB workspace's diff and its store against an object put of the same bytes", (*env).outputs},
	{RowSessions, "a session's checkpoint and restore of a 200 MiB tree, a one-file change, and a paused session woken by a send", (*env).sessions},
	{RowFairness, "a keyed job's start against an unkeyed one's, and a small key's wait behind a big key's backlog", (*env).fairness},
}

// AllRows lists every row's name, in the order they run.
var AllRows = func() []string {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	return names
}()

// RowHelp says what each row measures, one row a line.
func RowHelp() string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-12s %s\n", r.name, r.about)
	}
	return b.String()
}

// ErrConfig: a Config the suite cannot run.
var ErrConfig = errors.New("bench: invalid configuration")

// Config configures a run of the suite.
type Config struct {
	// Binary is the baton binary workers and runs start from (default:
	// this executable).
	Binary string
	// Rows to run (default AllRows).
	Rows []string
	// Quick shrinks every row (fewer lines, runs and repetitions) to check
	// the suite works; its figures are not the benchmark's.
	Quick bool
	// Keep leaves the suite's directory (journals, worker logs) in place.
	Keep bool
	// Progress gets a line per step (nil: silent).
	Progress io.Writer
	// DensityRuns overrides the density row's number of idle runs (0:
	// 200, or 10 when Quick).
	DensityRuns int
	// ProfileDir, if set, gets a CPU profile of every worker process
	// (<worker id>.cpu.pprof).
	ProfileDir string
}

// Result is one row of the table.
type Result struct {
	Row      string
	Target   string
	Measured string
	// Pass is "pass", "miss", or "n/a" (the row could not be measured
	// here; Measured says why).
	Pass string
}

const (
	pass = "pass"
	miss = "miss"
	na   = "n/a"
)

func verdict(ok bool) string {
	if ok {
		return pass
	}
	return miss
}

// Report is the suite's outcome.
type Report struct {
	Machine string
	Results []Result
}

// sizes are the parameters the rows run with.
type sizes struct {
	pipelineLines      int // lines of each run of the pipeline rows
	pipelineRuns       int // runs at once of the aggregate pipeline row
	latencyRate        float64
	latencyFor         time.Duration
	starts             int
	handoffs           int
	crashes            int
	scaleRuns          int
	scaleRate          float64
	scaleWindow        time.Duration
	scaleAgentTime     time.Duration // long enough to outlast the window; the runs are cancelled after it
	scaleStartWithin   time.Duration
	historyRecords     int           // finished records the history row writes
	historyReps        int           // worker starts per side of the history row
	densityRuns        int           // idle runs of the density row
	densityWindow      time.Duration // the density row's CPU window of the worker with no run
	densityIdleWindow  time.Duration // its CPU window with the runs idle
	densityStartWithin time.Duration
	inputMsgs          int   // messages the input row sends
	inputFirsts        int   // short runs whose first input the input row times
	outputsBytes       int64 // the outputs row's workspace
	outputsReps        int
	sessionBytes       int64         // the sessions row's tree
	fairnessPairs      int           // keyed and unkeyed runs (each) of the fairness row's overhead
	fairnessBig        int           // the big key's backlog
	fairnessFlat       int           // the unkeyed backlog before it, for its cycle
	fairnessSmall      int           // the small key's jobs timed behind it
	fairnessRun        time.Duration // each backlog run's length
}

var fullSizes = sizes{
	pipelineLines: 50_000, pipelineRuns: 20, latencyRate: 1000, latencyFor: 5 * time.Second,
	starts: 11, handoffs: 5, crashes: 5,
	scaleRuns: 200, scaleRate: 50, scaleWindow: 10 * time.Second, scaleAgentTime: 10 * time.Minute, scaleStartWithin: 2 * time.Minute,
	historyRecords: 100_000, historyReps: 5, inputMsgs: 500, inputFirsts: 5,
	// 4 lease TTLs: the slowest periodic work of a held run (the holder's
	// look at its record for a cancel, the input feeder's for input it
	// was not told of) falls in it once per run.
	densityRuns: 200, densityWindow: 15 * time.Second, densityIdleWindow: 4 * densityLeaseTTL, densityStartWithin: 10 * time.Minute,
	outputsBytes: 100 << 20, outputsReps: 5,
	sessionBytes:  200 << 20,
	fairnessPairs: 21, fairnessBig: 200, fairnessFlat: 40, fairnessSmall: 5, fairnessRun: 200 * time.Millisecond,
}

var quickSizes = sizes{
	pipelineLines: 5_000, pipelineRuns: 3, latencyRate: 1000, latencyFor: time.Second,
	starts: 3, handoffs: 1, crashes: 1,
	scaleRuns: 10, scaleRate: 50, scaleWindow: 2 * time.Second, scaleAgentTime: 10 * time.Minute, scaleStartWithin: 30 * time.Second,
	historyRecords: 5_000, historyReps: 1, inputMsgs: 100, inputFirsts: 2,
	densityRuns: 10, densityWindow: 3 * time.Second, densityIdleWindow: 3 * time.Second, densityStartWithin: time.Minute,
	outputsBytes: 8 << 20, outputsReps: 1,
	sessionBytes:  8 << 20,
	fairnessPairs: 2, fairnessBig: 16, fairnessFlat: 8, fairnessSmall: 2, fairnessRun: 200 * time.Millisecond,
}

// Run runs the suite and returns its table. A row that fails to run
// reports its error as a miss; Run itself fails only when the suite
// cannot start.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return Report{}, err
		}
		cfg.Binary = exe
	}
	names := cfg.Rows
	if len(names) == 0 {
		names = AllRows
	}
	for _, r := range names {
		if !slices.Contains(AllRows, r) {
			return Report{}, fmt.Errorf("%w: unknown row %q (rows: %s)", ErrConfig, r, strings.Join(AllRows, ", "))
		}
	}
	sz := fullSizes
	if cfg.Quick {
		sz = quickSizes
	}
	if cfg.DensityRuns < 0 {
		return Report{}, fmt.Errorf("%w: density runs %d", ErrConfig, cfg.DensityRuns)
	}
	if cfg.DensityRuns > 0 {
		sz.densityRuns = cfg.DensityRuns
		// About 100 starts a second at best, here.
		sz.densityStartWithin = max(sz.densityStartWithin, time.Duration(cfg.DensityRuns)*time.Second)
	}
	e, err := newEnv(cfg.Binary, cfg.Progress)
	if err == nil {
		e.profileDir = cfg.ProfileDir
	}
	if err != nil {
		return Report{}, err
	}
	defer e.close(cfg.Keep)
	rep := Report{Machine: machine() + "; runner chain from " + e.runner}
	switch {
	case e.suitePrioritized:
		rep.Machine += fmt.Sprintf("; autogroups on: the suite (NATS, subscribers) and each worker in groups of nice %d, each run in its own of nice 0", autogroupNice)
	case e.prioritized:
		rep.Machine += fmt.Sprintf("; autogroups on: the suite (NATS, subscribers) in the default group, each worker in a group of nice %d, each run in its own of nice 0", autogroupNice)
	}
	for _, r := range rows {
		if !slices.Contains(names, r.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		e.logf("row %s", r.name)
		res := r.run(e, ctx, sz)
		rep.Results = append(rep.Results, res...)
		e.stopWorkers()
	}
	return rep, nil
}

// failed is the result of a row that could not be measured.
func failed(row, target string, err error) []Result {
	return []Result{{Row: row, Target: target, Measured: "error: " + err.Error(), Pass: miss}}
}

// stopWorkers ends the workers a row started (hand-off of what they hold),
// then every runner still alive, so rows do not load each other.
func (e *env) stopWorkers() {
	for _, w := range e.workers {
		w.stop(15 * time.Second)
	}
	e.workers = nil
	e.endRuns()
}

// Print writes the report as one table.
func (r Report) Print(w io.Writer) error {
	fmt.Fprintf(w, "baton bench: %s\n\n", r.Machine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\ttarget\tmeasured\tresult")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Row, res.Target, res.Measured, res.Pass)
	}
	return tw.Flush()
}

// cpuSplit says where the CPU went between two samples d apart, in
// percent of the machine's CPUs.
func (e *env) cpuSplit(before, after cpuSample, d time.Duration) string {
	used := cpuBetween(before, after)
	total := float64(d) * float64(runtime.NumCPU())
	var parts []string
	for _, c := range []string{classWorker, classSuite, classRunner, classAgent, classOther} {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", c, 100*float64(used[c])/total))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d CPUs", runtime.NumCPU())
}

// machine describes where the suite ran.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%d CPUs (%s), Linux %s, %s, nats-server %s embedded (R1, file storage)",
		runtime.NumCPU(), model, kernel, runtime.Version(), server.VERSION)
}
