package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/sandbox"
)

// newRunnerCmds are the hidden stages of the runner chain the worker
// spawns (see package sandbox): runner-outer on the host, runner-inner,
// runner-inner-child as the sandbox's init, and runner-exec, which turns
// into the agent.
func newRunnerCmds(_ *globals) []*cobra.Command {
	stage := func(name, short string, run func(context.Context, string) error) *cobra.Command {
		var spec string
		cmd := &cobra.Command{
			Use:    name + " --spec PATH",
			Short:  short,
			Hidden: true,
			Args:   cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				// Each stage handles its own signals: the root's
				// interrupt context must not end it behind its back.
				return run(context.WithoutCancel(cmd.Context()), spec)
			},
		}
		cmd.Flags().StringVar(&spec, "spec", "", "the run's spec file")
		_ = cmd.MarkFlagRequired("spec")
		return cmd
	}
	return []*cobra.Command{
		stage("runner-outer", "Supervise one run: journal the agent, enforce its deadline (spawned by the worker)", sandbox.RunOuter),
		stage("runner-inner", "Start the sandbox's namespaces and relay the agent's status (spawned by runner-outer)", sandbox.RunInner),
		stage("runner-inner-child", "Set up the sandbox and run the agent as its init (cloned by runner-inner)", sandbox.RunInnerChild),
		stage("runner-exec", "Drop capabilities, apply rlimits and seccomp, and exec the agent (started by runner-inner-child)", sandbox.RunExec),
	}
}
