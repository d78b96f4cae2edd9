package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// queueFlags are `baton queue`'s flags.
type queueFlags struct {
	key    string
	limit  int
	asJSON bool
}

// options checks f and makes the client's options of it.
func (f queueFlags) options() ([]client.QueueOption, error) {
	if f.key != "" && !protocol.ValidConcurrencyKey(f.key) {
		return nil, fmt.Errorf("--key %q: a concurrency key matches [A-Za-z0-9_-]{1,64}", f.key)
	}
	if f.limit < 0 || f.limit > protocol.MaxQueueJobs {
		return nil, fmt.Errorf("--limit %d: want 0 (the workers' default, %d) to %d", f.limit, protocol.DefaultQueueJobs, protocol.MaxQueueJobs)
	}
	var opts []client.QueueOption
	if f.key != "" {
		opts = append(opts, client.WithQueueKey(f.key))
	}
	if f.limit > 0 {
		opts = append(opts, client.WithQueueLimit(f.limit))
	}
	return opts, nil
}

func newQueueCmd(g *globals) *cobra.Command {
	var f queueFlags
	cmd := &cobra.Command{
		Use:   "queue [--key KEY] [--limit N] [--json]",
		Short: "Show the jobs waiting per concurrency key, their position and why they wait",
		Long: `queue asks a worker (on <prefix>.read.queue) for the concurrency keys'
queue: each key with jobs waiting or running, its running jobs against its
limit across the cluster, its weight in the round-robin between keys, and
how many of its jobs wait. Then its first waiting jobs, in the order they
will start: position within the key, runId, profile, priority, how long it
has waited, and why it waits:

  key at its limit                the key runs as many jobs as its limit allows
  behind its key's earlier jobs   jobs of its key are ahead of it
  profile at its limit on every free worker
                                  every worker with a free slot runs its
                                  profile's maxConcurrent
  no free worker                  no worker has a free slot

Only jobs with a concurrencyKey wait in the keys' lanes; --key shows one
key, --limit lists up to N waiting jobs per key (default 10, at most 100).
'baton runs list --waiting' lists the same jobs as one table.`,
		Example: `  baton queue
  baton queue --key acme --limit 50
  baton queue --json | jq '.keys[] | select(.waiting > 0) | .key'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			v, err := s.c.Queue(cmd.Context(), opts...)
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			return printQueue(cmd.OutOrStdout(), v, f.key, f.limit, time.Now())
		},
	}
	f.addFlags(cmd.Flags())
	return cmd
}

func (f *queueFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.key, "key", "", "only this concurrency key")
	fl.IntVar(&f.limit, "limit", 0, fmt.Sprintf("list at most N waiting jobs per key (0: the workers' default, %d; at most %d)", protocol.DefaultQueueJobs, protocol.MaxQueueJobs))
	fl.BoolVar(&f.asJSON, "json", false, "print the queue view (docs/protocol.md) as JSON")
}

// printQueue is `baton queue`'s output: the workers' free slots, a table
// of the keys, then one of their waiting jobs. key and limit are the
// flags asked with ("" for every key, 0 for the workers' default).
func printQueue(w io.Writer, v protocol.QueueView, key string, limit int, now time.Time) error {
	if _, err := fmt.Fprintf(w, "%s, %s\n", plural(v.Workers, "worker"), plural(v.FreeSlots, "free slot")); err != nil {
		return err
	}
	if len(v.Keys) == 0 {
		what := "no key has a job waiting or running"
		if key != "" {
			what = "key " + key + " has no job waiting or running"
		}
		_, err := fmt.Fprintln(w, what)
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tRUNNING\tWEIGHT\tWAITING")
	for _, k := range v.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", cell(k.Key), runningText(k), k.Weight, k.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	jobs := waitingJobs(v)
	if len(jobs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return printWaiting(w, jobs, unlisted(v), limit >= protocol.MaxQueueJobs, now)
}

// runningText is a key's running jobs against its limit: "2/4", or
// "2 (no limit)".
func runningText(k protocol.KeyQueue) string {
	if k.Limit <= 0 {
		return strconv.Itoa(k.Running) + " (no limit)"
	}
	return fmt.Sprintf("%d/%d", k.Running, k.Limit)
}

// waitingJob is one waiting job with its key, as `baton runs list
// --waiting` lists it (and prints it as JSON).
type waitingJob struct {
	Key string `json:"key"`
	protocol.QueuedJob
}

// waitingJobs are the waiting jobs v lists, key after key in v's order,
// each key's in the order they will start.
func waitingJobs(v protocol.QueueView) []waitingJob {
	var out []waitingJob
	for _, k := range v.Keys {
		for _, j := range k.Jobs {
			out = append(out, waitingJob{Key: k.Key, QueuedJob: j})
		}
	}
	return out
}

// unlisted counts, per key, the waiting jobs v counts but does not list,
// in v's order.
func unlisted(v protocol.QueueView) []keyCount {
	var out []keyCount
	for _, k := range v.Keys {
		if n := k.Waiting - len(k.Jobs); n > 0 {
			out = append(out, keyCount{k.Key, n})
		}
	}
	return out
}

type keyCount struct {
	key string
	n   int
}

// printWaiting is the table of waiting jobs, then a line per key with
// jobs waiting past those listed; atMax: the request asked for as many as
// the workers list.
func printWaiting(w io.Writer, jobs []waitingJob, more []keyCount, atMax bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tPOS\tRUN ID\tPROFILE\tPRIO\tWAITING FOR\tREASON")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\n", cell(j.Key), j.Position, cell(j.RunID), cell(j.Profile),
			j.Priority, waitedFor(j.Since, now), cell(j.Reason.String()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	hint := fmt.Sprintf("--limit lists up to %d per key", protocol.MaxQueueJobs)
	if atMax {
		hint = fmt.Sprintf("the workers list at most %d per key", protocol.MaxQueueJobs)
	}
	for _, m := range more {
		if _, err := fmt.Fprintf(w, "%s: %s waiting, not listed (%s)\n", cell(m.key), plural(m.n, "more job"), hint); err != nil {
			return err
		}
	}
	return nil
}

// waitedFor is how long a job has waited since since, to the second
// under an hour, to the minute under a day, else to the hour: "42s",
// "3m05s", "2h03m", "3d04h"; "-" when unknown.
func waitedFor(since, now time.Time) string {
	if since.IsZero() {
		return "-"
	}
	d := max(now.Sub(since), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// plural is "1 job", "2 jobs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
