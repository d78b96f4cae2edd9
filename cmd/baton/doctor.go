package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/sandbox"
)

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine's sandbox prerequisites and say how to fix each",
		Long: `doctor checks what the sandbox needs: user namespaces (and the AppArmor
restriction on them), the kernel's mount API, seccomp, pasta, nft, access
to /dev/net/tun for the sandbox user, and cgroup v2 delegation, and prints
a fix for each problem. FAIL means no run can start here; warn means the
profiles that need the missing part cannot run (they fail to start, saying
so), while the others run with full isolation. It exits non-zero on FAIL.`,
		Example: "  baton doctor\n  baton doctor --config /etc/baton/baton.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			checks := sandbox.Doctor(sandbox.DoctorOptions{SandboxUID: cfg.SandboxUID, CgroupParent: cfg.CgroupParent})
			fmt.Fprint(cmd.OutOrStdout(), sandbox.Report(checks))
			if sandbox.Failed(checks) {
				return exitCodeError(1)
			}
			return nil
		},
	}
}
