package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/worker"
)

func newVersionCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print baton's version and the versions it was built with",
		Example: "  baton version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "baton %s (%s, %s/%s)\n", worker.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					switch d.Path {
					case "github.com/nats-io/nats.go", "github.com/nats-io/nats-server/v2":
						fmt.Fprintf(out, "  %s %s\n", d.Path, d.Version)
					}
				}
			}
			return nil
		},
	}
}
