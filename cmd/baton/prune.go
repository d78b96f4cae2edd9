package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/worker"
)

func newPruneCmd(g *globals) *cobra.Command {
	var olderThan time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove finished runs' directories from this node's state dir",
		Long: `prune removes the directory (journal, stderr, workspace) of every run in the
state dir that finished longer ago than --older-than (default: the
configuration's runRetention, 7 days) and whose runner has ended. A run that
has not finished is never removed. Workers do the same on their own every
tenth of runRetention; prune is for doing it now, or with another age. It
needs no NATS: the events stay in the stream for its eventsMaxAge.`,
		Example: `  # What would go, without removing anything
  baton prune --dry-run

  # Free space now: every run finished more than a day ago
  baton prune --state-dir /var/lib/baton --older-than 24h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("older-than") {
				cfg, err := g.loadConfig()
				if err != nil {
					return err
				}
				olderThan = cfg.RunRetention
			}
			var opts []worker.PruneOption
			if dryRun {
				opts = append(opts, worker.PruneDryRun())
			}
			pruned, err := worker.Prune(cmd.Context(), g.stateDir, olderThan, opts...)
			if err != nil && len(pruned) == 0 {
				return err
			}
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			var total int64
			if len(pruned) > 0 {
				fmt.Fprintln(tw, "RUN\tFINISHED AGO\tSIZE")
			}
			for _, p := range pruned {
				total += p.Bytes
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.RunID, p.Age.Round(time.Second), byteSize(p.Bytes))
			}
			if ferr := tw.Flush(); ferr != nil {
				return ferr
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(out, "%s %d run(s), %s, finished more than %s ago\n", verb, len(pruned), byteSize(total), olderThan)
			return err
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove runs finished longer ago than this (default: runRetention of the config)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
}

// byteSize is n in B, KiB, MiB or GiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, [...]string{"KiB", "MiB", "GiB"}[i])
}
