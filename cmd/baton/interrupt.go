package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/protocol"
)

func newInterruptCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "interrupt RUNID",
		Short: "Stop a running agent's current turn; the run goes on",
		Long: `interrupt asks the workers (on <prefix>.control.interrupt.<runId>) to
interrupt a run's agent: its profile's "interrupt" says how, SIGINT to the
agent's process group (the default) or a line written to its stdin (such as
Claude Code's control_request interrupt). The interrupt is stored in order
with the run's input and applied once, whichever worker holds the run. The
run goes on: to end it, use baton cancel. A run just submitted is waited
for, up to 5 s, until a worker has taken its job.`,
		Example: `  baton interrupt run-5kq2m8x3c1v7b0n4d6fa

  # Interrupt, then steer the agent
  baton interrupt run-5kq2m8x3c1v7b0n4d6fa && baton send run-5kq2m8x3c1v7b0n4d6fa --stream-json 'stop; look at the tests first'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			var rep protocol.InputReply
			err = whenKnown(cmd.Context(), sendWaitRecord, func() (err error) {
				rep, err = s.c.Interrupt(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "interrupt sent to run %s (BATON_INPUT seq %d)\n", rep.RunID, rep.Seq)
			return err
		},
	}
}
