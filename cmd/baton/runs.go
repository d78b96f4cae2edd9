package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// session is a client command's connection: the baton client, and the raw
// JetStream handle for the odd question the client does not answer.
type session struct {
	c     *client.Client
	js    jetstream.JetStream
	close func()
}

func openSession(ctx context.Context, g *globals) (*session, error) {
	names, err := g.names()
	if err != nil {
		return nil, err
	}
	nc, js, err := g.connect(ctx)
	if err != nil {
		return nil, err
	}
	c, err := client.New(js, names)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &session{c: c, js: js, close: nc.Close}, nil
}

func newRunsCmd(g *globals) *cobra.Command {
	var asJSON bool
	var filter runFilter
	list := func(cmd *cobra.Command, _ []string) error {
		if filter.waiting {
			return listWaiting(cmd, g, filter, asJSON)
		}
		if _, err := filter.apply(nil); err != nil { // a bad flag, said before connecting
			return err
		}
		s, err := openSession(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer s.close()
		// Unreadable records are left out with an error wrapping
		// kv.ErrDecode: show the others, then fail with it.
		runs, err := s.c.Runs(cmd.Context())
		if err != nil && !errors.Is(err, kv.ErrDecode) {
			return err
		}
		all := len(runs)
		runs, _ = filter.apply(runs) // its flags were checked above
		var werr error
		switch {
		case asJSON:
			views := make([]client.RunView, len(runs))
			for i, r := range runs {
				views[i] = client.NewRunView(r)
			}
			werr = writeJSON(cmd.OutOrStdout(), views)
		case len(runs) == 0 && all == 0:
			_, werr = fmt.Fprintln(cmd.OutOrStdout(), "no runs: the runs bucket holds no record")
		case len(runs) == 0:
			_, werr = fmt.Fprintf(cmd.OutOrStdout(), "no runs match (of %d)\n", all)
		default:
			werr = printRunsTable(cmd.OutOrStdout(), runs)
		}
		return cmp.Or(werr, err)
	}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs and show their records",
		Long: `runs reads the run records that workers keep in the runs bucket: state,
node, worker, attempt, times, exit code and journal offset. With no
subcommand it lists them, newest first: --state, --profile and --label
keep the runs that match every one given (--state takes several states,
comma-separated or repeated), and --limit keeps the newest N of those.

--waiting lists the jobs that have no run yet: those waiting in their
concurrency key's lane, key by key in the order they will start, with
their position in the key and why each waits (key at its limit, behind
its key's earlier jobs, profile at its limit, no free worker). --profile
and --limit apply to them too; 'baton queue' shows the keys themselves.`,
		Example: `  baton runs
  baton runs list --state failed,timeout --profile claude --limit 10
  baton runs list --waiting
  baton runs list --label pr=1234 --json | jq -r '.[].runId'
  baton runs get run-5kq2m8x3c1v7b0n4d6fa`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Example: `  baton runs list
  baton runs list --state running
  baton runs list --waiting --profile claude
  baton runs list --json`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	// The same filters on "runs" and "runs list", which list alike; not
	// persistent, as "runs get" takes none.
	filter.addFlags(cmd.Flags())
	filter.addFlags(listCmd.Flags())
	cmd.AddCommand(listCmd, &cobra.Command{
		Use:   "get RUNID",
		Short: "Show every field of one run's record",
		Example: `  baton runs get run-5kq2m8x3c1v7b0n4d6fa
  baton runs get run-5kq2m8x3c1v7b0n4d6fa --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			rec, err := s.c.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), client.NewRunView(rec))
			}
			return printRun(cmd.OutOrStdout(), rec)
		},
	})
	return cmd
}

// runFilter is the runs list flags that choose runs.
type runFilter struct {
	states  []string
	profile string
	labels  []string
	limit   int
	// waiting lists the jobs waiting in the keys' lanes instead of the
	// run records.
	waiting bool
}

func (f *runFilter) addFlags(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.states, "state", nil, "only runs in these states: "+strings.Join(runStates, ", ")+" (comma-separated or repeated)")
	fl.StringVar(&f.profile, "profile", "", "only runs of this profile")
	fl.StringArrayVar(&f.labels, "label", nil, "KEY=VALUE: only runs with this label (repeatable: all of them)")
	fl.IntVar(&f.limit, "limit", 0, "show at most the newest N of the runs chosen (0: all)")
	fl.BoolVar(&f.waiting, "waiting", false, "list the jobs waiting in the concurrency keys' lanes (no run yet), with their position and why they wait")
}

// applyWaiting returns the waiting jobs f keeps, in their order, or what
// is wrong with f's flags: a waiting job has no record yet, so no state
// and no labels to choose it by.
func (f runFilter) applyWaiting(jobs []waitingJob) ([]waitingJob, error) {
	switch {
	case len(f.states) > 0:
		return nil, errors.New("--state chooses run records: a waiting job has none yet (--waiting lists them all)")
	case len(f.labels) > 0:
		return nil, errors.New("--label chooses run records: the queue does not carry a waiting job's labels")
	case f.limit < 0:
		return nil, fmt.Errorf("--limit %d: want 0 (all) or more", f.limit)
	}
	var out []waitingJob
	for _, j := range jobs {
		if f.limit > 0 && len(out) == f.limit {
			break
		}
		if f.profile != "" && j.Profile != f.profile {
			continue
		}
		out = append(out, j)
	}
	return out, nil
}

// listWaiting is `baton runs list --waiting`: the jobs the queue lists
// (as many per key as the workers list, protocol.MaxQueueJobs), filtered.
func listWaiting(cmd *cobra.Command, g *globals, f runFilter, asJSON bool) error {
	if _, err := f.applyWaiting(nil); err != nil { // a bad flag, said before connecting
		return err
	}
	s, err := openSession(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer s.close()
	v, err := s.c.Queue(cmd.Context(), client.WithQueueLimit(protocol.MaxQueueJobs))
	if err != nil {
		return err
	}
	all := waitingJobs(v)
	jobs, _ := f.applyWaiting(all) // its flags were checked above
	return printWaitingList(cmd.OutOrStdout(), jobs, len(all), unlisted(v), asJSON, time.Now())
}

// printWaitingList is `baton runs list --waiting`'s output: jobs, of all
// the queue listed, and the keys with more waiting than listed.
func printWaitingList(w io.Writer, jobs []waitingJob, all int, more []keyCount, asJSON bool, now time.Time) error {
	switch {
	case asJSON:
		if jobs == nil {
			jobs = []waitingJob{}
		}
		return writeJSON(w, jobs)
	case len(jobs) == 0 && all == 0:
		_, err := fmt.Fprintln(w, "no waiting jobs: no job waits in a concurrency key's lane")
		return err
	case len(jobs) == 0:
		_, err := fmt.Fprintf(w, "no waiting jobs match (of %d)\n", all)
		return err
	}
	return printWaiting(w, jobs, more, true, now)
}

// runStates are the states a run record holds.
var runStates = []string{
	string(kv.RunStarting), string(kv.RunRunning), string(protocol.StatusSucceeded), string(protocol.StatusFailed),
	string(protocol.StatusCancelled), string(protocol.StatusTimeout), string(protocol.StatusLost),
}

// apply returns the runs (newest first) that f keeps, in their order, or
// what is wrong with f's flags.
func (f runFilter) apply(runs []kv.RunRecord) ([]kv.RunRecord, error) {
	for _, st := range f.states {
		if !slices.Contains(runStates, st) {
			return nil, fmt.Errorf("--state %q: not a run state (%s)", st, strings.Join(runStates, ", "))
		}
	}
	labels, err := parseAssignments("--label", f.labels)
	if err != nil {
		return nil, err
	}
	if f.limit < 0 {
		return nil, fmt.Errorf("--limit %d: want 0 (all) or more", f.limit)
	}
	var out []kv.RunRecord
	for _, r := range runs {
		if f.limit > 0 && len(out) == f.limit {
			break
		}
		if len(f.states) > 0 && !slices.Contains(f.states, string(r.State)) || f.profile != "" && r.Profile != f.profile {
			continue
		}
		if !hasLabels(r.Labels, labels) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func printRunsTable(w io.Writer, runs []kv.RunRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tSTATE\tPROFILE\tNODE\tATTEMPT\tCREATED\tEXIT")
	for _, r := range runs {
		state := string(r.State)
		if r.CancelRequested && !r.State.Terminal() {
			state += " (cancelling)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
			r.RunID, cell(state), cell(r.Profile), cell(r.Node), r.Attempt, fmtTime(r.CreatedAt), fmtExit(r.ExitCode))
	}
	return tw.Flush()
}

// printRun shows every field of a run record.
func printRun(w io.Writer, r kv.RunRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Run ID", r.RunID)
	row("State", cell(string(r.State)))
	row("Profile", cell(r.Profile))
	row("Node", cell(r.Node))
	row("Worker", cell(r.Worker))
	row("Attempt", fmt.Sprint(r.Attempt))
	row("Retries", fmt.Sprint(r.Retries))
	row("Cancel requested", fmt.Sprint(r.CancelRequested))
	row("Created", fmtTime(r.CreatedAt))
	row("Started", fmtTime(r.StartedAt))
	row("Finished", fmtTime(r.FinishedAt))
	row("Deadline", fmtTime(r.Deadline))
	row("Exit code", fmtExit(r.ExitCode))
	row("Reason", cell(r.Reason))
	if r.State.Terminal() {
		row("Journal offset", fmt.Sprint(r.Offset))
		row("Last event seq", fmt.Sprint(r.LastSeq))
	} else { // written when the run ends
		row("Journal offset", "- (recorded when the run ends)")
		row("Last event seq", "- (recorded when the run ends)")
	}
	usage := "- (recorded when the run ends)"
	if r.Usage != nil {
		usage = fmtUsage(*r.Usage)
	}
	row("Usage", usage)
	row("Input", cell(cut(r.Input, 200)))
	job := fmt.Sprintf("not kept: no retry, no re-run (a worker keeps a job of up to %d KiB)", protocol.MaxKeptJob>>10)
	if len(r.Job) > 0 {
		job = fmt.Sprintf("kept, %s ('baton rerun %s' runs it again)", byteSize(int64(len(r.Job))), r.RunID)
	}
	row("Job", job)
	interactive := "no (stdin: once)"
	if r.Interactive {
		interactive = "yes (stdin: stream)"
		if r.TurnEndField != "" {
			interactive += fmt.Sprintf("; a turn ends at %s=%s", sanitize([]byte(r.TurnEndField), false), sanitize([]byte(r.TurnEndEquals), false))
		}
		if r.IdleTimeout > 0 {
			interactive += fmt.Sprintf("; idle timeout %v", r.IdleTimeout)
		}
	}
	row("Interactive", interactive)
	events := "- (told from the lines)"
	if r.Events != "" {
		events = sanitize([]byte(r.Events), false)
	}
	row("Events dialect", events+" ('baton watch --agui' projects it)")
	row("Policy", policyText(r.Policy, r.AskTimeout))
	row("Waiting since", fmtTime(r.WaitingSince))
	row("Session", cell(r.Session))
	if r.Session != "" {
		pause := "never (no pauseAfter)"
		if r.PauseAfter > 0 {
			pause = fmt.Sprintf("after waiting %v", r.PauseAfter)
			if r.PauseRequested {
				pause += "; requested"
			}
		}
		row("Pause", pause)
		cp := "- (stored when the run ends)"
		if c := r.Checkpoint; c != nil {
			cp = fmt.Sprintf("%s, %d files, %s (%s stored)", sanitize([]byte(c.Object), false), c.Files, byteSize(c.TreeBytes), byteSize(int64(c.Size)))
		}
		row("Checkpoint", cp)
	}
	row("Spawning", fmt.Sprint(r.Spawning))
	if r.Key != "" {
		row("Concurrency key", sanitize([]byte(r.Key), false))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		row("Label "+sanitize([]byte(k), false), sanitize([]byte(r.Labels[k]), false))
	}
	return tw.Flush()
}

// policyText shows a run's policy and askTimeout on one line.
func policyText(p *policy.Policy, askTimeout time.Duration) string {
	if p == nil {
		return "- (permission prompts are passed through)"
	}
	def := p.Default
	if def == "" {
		def = policy.Ask
	}
	s := "default " + string(def)
	for _, l := range []struct {
		name  string
		rules []string
	}{{"allow", p.Allow}, {"ask", p.Ask}, {"deny", p.Deny}} {
		if len(l.rules) > 0 {
			s += "; " + l.name + " " + strings.Join(l.rules, ", ")
		}
	}
	return sanitize([]byte(s), false) + fmt.Sprintf("; an ask waits %v", askTimeout)
}

// cell is a table cell: "-" when empty, and no character that breaks the row.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return sanitize([]byte(s), false)
}

// fmtTime shows a time in the local zone, naming it ("-" for none).
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

func fmtExit(code *int) string {
	if code == nil {
		return "-"
	}
	return fmt.Sprint(*code)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
