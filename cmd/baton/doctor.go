package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
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
so), while the others run with full isolation. It also says whether a worker
of this binary finds baton-runner beside it, and, as root, that the sandbox
user can search every directory above --state-dir (a root worker's runs of
profiles that run {baton} need it), and that leaseTTL is at least twice the
longest gap between heartbeats the node's workers recorded in the last week
(a loaded node's late heartbeats cost leases, then the node). For each
profile of the configuration it checks that the sandbox finds its command
(on the profile's PATH, in the system directories and the profile's
mounts): warn for a profile whose runs cannot start, FAIL when no profile
can. It exits non-zero on FAIL.`,
		Example: "  baton doctor\n  baton doctor --config /etc/baton/baton.yaml --state-dir /var/lib/baton",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			checks := sandbox.Doctor(sandbox.DoctorOptions{SandboxUID: cfg.SandboxUID, CgroupParent: cfg.CgroupParent, StateDir: g.stateDir})
			if self, err := os.Executable(); err == nil {
				checks = append(checks, runnerCheck(self))
				checks = append(checks, profileChecks(cfg, self)...)
			}
			checks = append(checks, worker.HeartbeatCheck(g.stateDir, cfg.LeaseTTL))
			fmt.Fprint(cmd.OutOrStdout(), sandbox.Report(checks))
			if sandbox.Failed(checks) {
				return exitCodeError(1)
			}
			return nil
		},
	}
}

// runnerCheck says which binary a worker of baton runs the runner chain
// from (see worker.FindRunner).
func runnerCheck(baton string) sandbox.Check {
	c := sandbox.Check{Name: worker.RunnerName}
	if r := worker.FindRunner(baton); r != baton {
		c.Severity, c.Detail = sandbox.SevOK, "beside baton ("+r+"): runs start from it"
		return c
	}
	c.Severity = sandbox.SevWarn
	c.Detail = "not beside baton (" + filepath.Dir(baton) + "): runs start from baton itself, some 15 ms slower each"
	c.Fix = "install baton-runner from the same build beside baton (CGO_ENABLED=0 go install github.com/batonhq/baton/cmd/...), or give workers --runner PATH"
	return c
}

// profileChecks says, for each profile of cfg, whether its runs find their
// command: a missing CLI otherwise shows only as each run's failure.
func profileChecks(cfg *config.Config, self string) []sandbox.Check {
	var checks []sandbox.Check
	missing := 0
	for _, name := range slices.Sorted(maps.Keys(cfg.Profiles)) {
		c := sandbox.Check{Name: "profile " + name}
		if path, err := cfg.Profiles[name].FindCommand(self); err != nil {
			missing++
			c.Severity, c.Detail = sandbox.SevWarn, strings.TrimPrefix(err.Error(), "config: ")
			c.Fix = "install the command in a system directory (/usr/local/bin, /usr/bin), or mount its directory (mounts:) and put it on the profile's PATH (env: {PATH: ...})"
		} else {
			c.Severity, c.Detail = sandbox.SevOK, "runs "+path
		}
		checks = append(checks, c)
	}
	if missing > 0 && missing == len(checks) {
		for i := range checks {
			checks[i].Severity = sandbox.SevFail
		}
	}
	return checks
}
