package stage

import (
	"context"
	"fmt"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

// Stages are the runner chain's stages by subcommand name, each run as
// `<binary> <name> --spec PATH`: by the baton binary, and by the smaller
// baton-runner binary that starts faster (cmd/baton-runner).
var Stages = []struct {
	Name  string
	Short string
	Run   func(ctx context.Context, specPath string) error
}{
	{chain.StageOuter, "Supervise one run: journal the agent, enforce its deadline (spawned by the worker)", RunOuter},
	{chain.StageOuterWait, "Supervise one run once runner-outer has set it up and exec'd itself (exec'd by runner-outer)", RunOuterWait},
	{chain.StageInner, "Set up the sandbox's network namespace, start its init and exit (spawned by runner-outer)", RunInner},
	{chain.StageInnerChild, "Set up the sandbox and run the agent as its init (cloned by runner-inner, then runner-outer's child)", RunInnerChild},
	{chain.StageInitWait, "Start the agent and wait for it as the sandbox's init, its setup done (exec'd by runner-inner-child)", RunInitWait},
	{chain.StageExec, "Drop capabilities, apply rlimits and seccomp, and exec the agent (started by runner-inner-child)", RunExec},
}

// Run runs the stage named name, as its subcommand does, with the
// collections paced without the runtime's forced ones (paceGC).
func Run(ctx context.Context, name, specPath string) error {
	for _, s := range Stages {
		if s.Name == name {
			paceGC()
			return s.Run(ctx, specPath)
		}
	}
	return fmt.Errorf("sandbox: no runner stage %q", name)
}
