package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/sandbox"
	// The TLS of runs with secrets, which baton-runner leaves out.
	_ "github.com/batonhq/baton/sandbox/secrettls"
)

// newRunnerCmds are the hidden stages of the runner chain the worker
// spawns (see package sandbox): runner-outer on the host (then
// runner-outer-wait, its exec), runner-inner, runner-inner-child as the
// sandbox's init (then runner-init-wait), and runner-exec, which turns
// into the agent. cmd/baton-runner has the same stages in a smaller
// binary; the worker uses it when it is installed beside baton.
func newRunnerCmds(_ *globals) []*cobra.Command {
	var cmds []*cobra.Command
	for _, st := range sandbox.Stages {
		var spec string
		cmd := &cobra.Command{
			Use:    st.Name + " --spec PATH",
			Short:  st.Short,
			Hidden: true,
			Args:   cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				// Each stage handles its own signals: the root's
				// interrupt context must not end it behind its back.
				return st.Run(context.WithoutCancel(cmd.Context()), spec)
			},
		}
		cmd.Flags().StringVar(&spec, "spec", "", "the run's spec file")
		_ = cmd.MarkFlagRequired("spec")
		cmds = append(cmds, cmd)
	}
	return cmds
}
