package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/protocol"
)

func newRerunCmd(g *globals) *cobra.Command {
	var runID string
	var watch, asJSON bool
	cmd := &cobra.Command{
		Use:   "rerun RUNID",
		Short: "Submit a run's job again, as a new run",
		Long: fmt.Sprintf(`rerun submits the job of run RUNID again under a new run id (--run-id, or
a random run-…), and prints that id: the same profile, input, arguments,
environment, files, limits, labels and retries, as the run's record keeps
them (the labels baton set on a retry are dropped). A worker keeps each
job in its run's record unless it is over %d KiB (or half the server's
max payload); such a run cannot be re-run, nor one whose record expired.

With --watch it then follows the new run like 'baton watch', and its exit
status follows the run's.`, protocol.MaxKeptJob>>10),
		Example: `  baton rerun run-5kq2m8x3c1v7b0n4d6fa --watch
  baton rerun nightly-2026-01-31 --run-id nightly-2026-01-31-b`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runID == "" {
				runID = protocol.NewRunID()
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			submitted := time.Now().Add(-time.Minute) // as submit: a rejection before is an older job's
			job, err := s.c.Rerun(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = writeJSON(out, map[string]string{"runId": job.RunID, "of": args[0]})
			} else {
				_, err = fmt.Fprintln(out, job.RunID)
			}
			if err != nil || !watch {
				return err
			}
			return s.watchSince(cmd.Context(), job.RunID, submitted, job.Input, asJSON, out, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "the new run's id (default: a random run-…)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the new run until it ends, like 'baton watch'")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"runId":…,"of":…}; with --watch, payloads as 'watch --json'`)
	return cmd
}
