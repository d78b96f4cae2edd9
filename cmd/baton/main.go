// Command baton runs AI agent CLIs as durable, sandboxed runs fed from NATS
// JetStream. One binary holds the worker, the client commands, the runner
// chain the worker spawns, and a fake agent for demos and tests.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		var ec exitCodeError
		if asExitCode(err, &ec) {
			os.Exit(int(ec))
		}
		fmt.Fprintln(os.Stderr, "baton:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "baton",
		Short: "Durable, sandboxed AI agent runs fed from NATS JetStream",
		Long: `baton runs AI agent CLIs as durable runs. Workers pull run jobs from a
JetStream stream, start each agent in a Linux sandbox whose stdout is
journaled, and republish every line on baton.runs.<runId>.events.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.register(root.PersistentFlags())
	root.AddCommand(
		newDemoCmd(g),
		newWorkerCmd(g),
		newSubmitCmd(g),
		newRerunCmd(g),
		newWatchCmd(g),
		newRunsCmd(g),
		newQueueCmd(g),
		newUsageCmd(g),
		newSessionsCmd(g),
		newCancelCmd(g),
		newSendCmd(g),
		newInterruptCmd(g),
		newApproveCmd(g),
		newApprovalsCmd(g),
		newAttachCmd(g),
		newOutputsCmd(g),
		newPruneCmd(g),
		newDLQCmd(g),
		newConsoleCmd(g),
		newTokenCmd(g),
		newFakeAgentCmd(g),
		newMCPCmd(g),
		newDoctorCmd(g),
		newVersionCmd(g),
		newBenchCmd(g),
	)
	root.AddCommand(newRunnerCmds(g)...)
	return root
}
