package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

func newOutputsCmd(g *globals) *cobra.Command {
	var get, dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "outputs RUNID",
		Short: "List or fetch what a run's capture stored (diff, files)",
		Long: `outputs lists what was captured from a run's workspace when it ended, as
its terminal status lists it: the object's name in the Object Store bucket
BATON_OUTPUTS (<runId>/diff.patch; <runId>/files/<hex SHA-256 of the path>
for a file, so that no workspace path is in a subject), a file's workspace
path, its size and its SHA-256. --get NAME, PATH or files/PATH (or "all")
writes objects under -o DIR: the diff as DIR/diff.patch, a file as
DIR/files/<path>, re-checking each digest; an object that does not match is
not written and the command fails.

A path that is not printable UTF-8 is listed escaped as %XX per byte; it is
written under its own bytes.`,
		Example: `  baton outputs run-5kq2m8x3c1v7b0n4d6fa
  baton outputs run-5kq2m8x3c1v7b0n4d6fa --get diff.patch -o . && git apply diff.patch
  baton outputs run-5kq2m8x3c1v7b0n4d6fa --get all -o ./out

  # Without baton, with the NATS CLI:
  nats object get BATON_OUTPUTS run-5kq2m8x3c1v7b0n4d6fa/diff.patch -O diff.patch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID := args[0]
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			ro, err := s.c.Outputs(cmd.Context(), runID)
			if err != nil {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if get == "" {
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					return enc.Encode(map[string]any{"runId": runID, "status": ro.Status, "outputs": nonNil(ro.Outputs),
						"outputsError": ro.Error, "outputsNotes": ro.Notes})
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tPATH\tSIZE\tDIGEST")
				for _, o := range ro.Outputs {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", o.Name, cmp.Or(o.Path, "-"), o.Size, o.Digest)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			for _, n := range ro.Notes {
				fmt.Fprintf(errOut, "note: %s\n", n)
			}
			if ro.Error != "" {
				fmt.Fprintf(errOut, "outputs incomplete: %s\n", ro.Error)
			}
			if get == "" {
				return nil
			}
			var chosen []protocol.Output
			for _, o := range ro.Outputs {
				_, rel, _ := outputs.SplitOutput(runID, o)
				if get == "all" || o.Name == get || o.Name == runID+"/"+get || (rel != "" && (get == rel || get == "files/"+rel)) {
					chosen = append(chosen, o)
				}
			}
			if len(chosen) == 0 {
				return fmt.Errorf("run %s has no output %q (see baton outputs %s)", runID, get, runID)
			}
			for _, o := range chosen {
				p, err := s.c.SaveOutput(cmd.Context(), runID, o, dir)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s\t%d\t%s\n", p, o.Size, o.Digest)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&get, "get", "", `write this output ("<runId>/…" or the name after "<runId>/", e.g. diff.patch, or a file's workspace path), or "all"`)
	cmd.Flags().StringVarP(&dir, "output", "o", ".", "directory to write --get's outputs under")
	cmd.Flags().BoolVar(&asJSON, "json", false, "list as JSON")
	return cmd
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
