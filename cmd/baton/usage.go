package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// errBadGrouping is a --by that names no grouping.
var errBadGrouping = errors.New("--by: want profile, key, run or label:NAME")

// usageRow is one group's usage: the sum of its finished runs'.
type usageRow struct {
	Group string         `json:"group"`
	Runs  int            `json:"runs"`
	Usage protocol.Usage `json:"usage"`
}

// usageGrouping names a finished run's group under --by.
type usageGrouping func(kv.RunRecord) string

func parseGrouping(by string) (usageGrouping, error) {
	switch {
	case by == "profile":
		return func(r kv.RunRecord) string { return r.Profile }, nil
	case by == "run":
		return func(r kv.RunRecord) string { return r.RunID }, nil
	case by == "key":
		return jobKey, nil
	case strings.HasPrefix(by, "label:") && len(by) > len("label:"):
		name := strings.TrimPrefix(by, "label:")
		return func(r kv.RunRecord) string { return r.Labels[name] }, nil
	}
	return nil, fmt.Errorf("%w, not %q", errBadGrouping, by)
}

// jobKey is the run's concurrency key: its record's, else the one its
// kept job names (a record of an older worker), "" for none.
func jobKey(r kv.RunRecord) string {
	if r.Key != "" {
		return r.Key
	}
	var j struct {
		Key string `json:"concurrencyKey"`
	}
	_ = json.Unmarshal(r.Job, &j) // a job not kept, or without a key, has none
	return j.Key
}

// sumUsage groups the runs that ended at or after since (zero: all) and
// carry a usage, and sums each group's; the groups come largest CPU time
// first.
func sumUsage(runs []kv.RunRecord, group usageGrouping, since time.Time) []usageRow {
	rows := map[string]*usageRow{}
	for _, r := range runs {
		if r.Usage == nil || !r.State.Terminal() || r.FinishedAt.Before(since) {
			continue
		}
		g := group(r)
		row := rows[g]
		if row == nil {
			row = &usageRow{Group: g}
			rows[g] = row
		}
		row.Runs++
		row.Usage.Add(*r.Usage)
	}
	out := make([]usageRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b usageRow) int {
		return cmp.Or(cmp.Compare(b.Usage.CPUSeconds, a.Usage.CPUSeconds), strings.Compare(a.Group, b.Group))
	})
	return out
}

func newUsageCmd(g *globals) *cobra.Command {
	var (
		by     string
		since  time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Sum what finished runs used, by profile, key or label",
		Long: `usage sums the usage that finished runs' records carry (docs/protocol.md,
"Usage"): wall and CPU time, peak memory (the largest), what the agents
printed, inputs, egress, stored outputs and checkpoints, and the tokens and
cost the agents reported. --by groups the runs: profile (the default), key
(the job's concurrencyKey), run, or label:NAME (a label's value); --since
keeps the runs that ended that recently (0: every record the runs bucket
still keeps, see recordTTL).`,
		Example: `  baton usage
  baton usage --by label:tenant --since 24h
  baton usage --by run --since 1h --json | jq '.[] | {group, cost: .usage.agent.costUsd}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := parseGrouping(by)
			if err != nil {
				return err
			}
			if since < 0 {
				return fmt.Errorf("--since %v: want 0 (all) or more", since)
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			// Unreadable records are left out with an error wrapping
			// kv.ErrDecode: sum the others, then fail with it.
			runs, err := s.c.Runs(cmd.Context())
			if err != nil && !errors.Is(err, kv.ErrDecode) {
				return err
			}
			var from time.Time
			if since > 0 {
				from = time.Now().Add(-since)
			}
			rows := sumUsage(runs, group, from)
			var werr error
			if asJSON {
				werr = writeJSON(cmd.OutOrStdout(), rows)
			} else {
				werr = printUsage(cmd.OutOrStdout(), rows)
			}
			return cmp.Or(werr, err)
		},
	}
	cmd.Flags().StringVar(&by, "by", "profile", "group by profile, key (the job's concurrencyKey), run, or label:NAME")
	cmd.Flags().DurationVar(&since, "since", 0, "only runs that ended this recently, e.g. 24h (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printUsage(w io.Writer, rows []usageRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no finished runs with usage")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tRUNS\tWALL\tCPU\tMAX RSS\tSTDOUT\tLINES\tINPUTS\tEGRESS\tSTORED\tTOKENS IN/OUT/CACHE\tCOST USD")
	for _, r := range rows {
		u := r.Usage
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d/%d/%d\t%.4f\n",
			cell(r.Group), r.Runs, seconds(u.WallSeconds), seconds(u.CPUSeconds), byteSize(u.MaxRSSBytes), byteSize(u.StdoutBytes),
			u.Lines, u.Inputs, byteSize(u.EgressBytes), byteSize(u.OutputsBytes+u.CheckpointBytes),
			u.Agent.InputTokens, u.Agent.OutputTokens, u.Agent.CacheTokens, u.Agent.CostUSD)
	}
	return tw.Flush()
}

// seconds shows a number of seconds as a duration, to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// fmtUsage is a usage on one line.
func fmtUsage(u protocol.Usage) string {
	return fmt.Sprintf("wall %s, cpu %s (user %s, system %s), max rss %s, stdout %s in %d lines, %d inputs, egress %s, stored %s, tokens %d in/%d out/%d cache, $%.4f",
		seconds(u.WallSeconds), seconds(u.CPUSeconds), seconds(u.CPUUserSeconds), seconds(u.CPUSystemSeconds), byteSize(u.MaxRSSBytes),
		byteSize(u.StdoutBytes), u.Lines, u.Inputs, byteSize(u.EgressBytes), byteSize(u.OutputsBytes+u.CheckpointBytes),
		u.Agent.InputTokens, u.Agent.OutputTokens, u.Agent.CacheTokens, u.Agent.CostUSD)
}
