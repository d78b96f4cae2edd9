package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
)

func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUNID",
		Short: "Ask for a run to be cancelled",
		Long: `cancel asks the workers (on <prefix>.control.cancel.<runId>) to cancel a run.
One of them records the intent in the run's record; the worker that holds
the run, now or after a hand-off, stops the agent (SIGTERM, a grace period,
then SIGKILL) and publishes the 'cancelled' status. Cancelling a run twice is
harmless; cancelling one that already ended is an error, and so is no worker
answering within 10s.`,
		Example: `  baton cancel run-5kq2m8x3c1v7b0n4d6fa

  # Cancel, then wait for the run to stop
  baton cancel run-5kq2m8x3c1v7b0n4d6fa && baton watch run-5kq2m8x3c1v7b0n4d6fa`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			rec, err := s.c.Cancel(cmd.Context(), args[0])
			if errors.Is(err, client.ErrTerminal) {
				return fmt.Errorf("run %s already ended; nothing to cancel", args[0])
			}
			if err != nil {
				return err
			}
			where := "no worker holds it yet; the one that starts it will stop it"
			if rec.Worker != "" {
				where = fmt.Sprintf("worker %s on node %s will stop it", cell(rec.Worker), cell(rec.Node))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "cancel requested for run %s (%s): %s\n", rec.RunID, cell(string(rec.State)), where)
			return err
		},
	}
}
