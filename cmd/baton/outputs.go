package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
path, its size and its SHA-256; a run that captured nothing (its profile
captures nothing, or it left nothing to capture) says so. --get NAME, PATH or
files/PATH (or "all") writes objects under -o DIR: the diff as
DIR/diff.patch, a file as DIR/files/<path>, re-checking each digest; an
object that does not match is not written and the command fails. With
-o - the one output named is written to stdout instead; as its digest is
checked at its end, a mismatch fails the command after its bytes went out.

A path that is not printable UTF-8 is listed escaped as %XX per byte; it is
written under its own bytes.`,
		Example: `  baton outputs run-5kq2m8x3c1v7b0n4d6fa
  baton outputs run-5kq2m8x3c1v7b0n4d6fa --get diff.patch -o . && git apply diff.patch
  baton outputs run-5kq2m8x3c1v7b0n4d6fa --get all -o ./out
  baton outputs run-5kq2m8x3c1v7b0n4d6fa --get out/report.md -o - | less

  # Without baton, with the NATS CLI:
  nats object get BATON_OUTPUTS run-5kq2m8x3c1v7b0n4d6fa/diff.patch -O diff.patch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID := args[0]
			if dir == "-" && (get == "" || get == "all") {
				return errors.New(`-o - writes one output to stdout: name it with --get (not "all")`)
			}
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
				if err := printOutputs(out, runID, ro.Outputs); err != nil {
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
			if len(ro.Outputs) == 0 {
				return fmt.Errorf("run %s has no outputs", runID)
			}
			var chosen []protocol.Output
			for _, o := range ro.Outputs {
				if get == "all" || outputNamed(runID, get, o) {
					chosen = append(chosen, o)
				}
			}
			if len(chosen) == 0 {
				return fmt.Errorf("run %s has no output %q (see baton outputs %s)", runID, get, runID)
			}
			if dir == "-" {
				if len(chosen) > 1 { // a path spelt as another's name; unlikely, but stdout takes one
					return fmt.Errorf("run %s: %q names %d outputs; -o - writes one", runID, get, len(chosen))
				}
				return s.c.GetOutput(cmd.Context(), chosen[0], out)
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
	cmd.Flags().StringVarP(&dir, "output", "o", ".", "directory to write --get's outputs under; - writes the one output to stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "list as JSON")
	return cmd
}

// printOutputs lists a run's outputs as a table, or says it has none.
func printOutputs(w io.Writer, runID string, outs []protocol.Output) error {
	if len(outs) == 0 {
		_, err := fmt.Fprintf(w, "run %s has no outputs\n", runID)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPATH\tSIZE\tDIGEST")
	for _, o := range outs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", o.Name, cmp.Or(o.Path, "-"), o.Size, o.Digest)
	}
	return tw.Flush()
}

// outputNamed reports whether get names output o of run runID: its
// object name, with or without "<runId>/", or its workspace path (as
// listed, escaped, or as its bytes), with or without "files/".
func outputNamed(runID, get string, o protocol.Output) bool {
	if get == o.Name || runID+"/"+get == o.Name {
		return true
	}
	_, rel, err := outputs.SplitOutput(runID, o)
	if err != nil || rel == "" {
		return false
	}
	for _, p := range []string{rel, outputs.EscapePath(rel)} {
		if get == p || get == "files/"+p {
			return true
		}
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
