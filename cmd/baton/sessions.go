package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

func newSessionsCmd(g *globals) *cobra.Command {
	var asJSON bool
	var labels []string
	list := func(cmd *cobra.Command, _ []string) error {
		want, err := parseAssignments("--label", labels)
		if err != nil {
			return err
		}
		s, err := openSession(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer s.close()
		// Unreadable records are left out with an error wrapping
		// kv.ErrDecode: show the others, then fail with it.
		recs, err := s.c.Sessions(cmd.Context(), want)
		if err != nil && !errors.Is(err, kv.ErrDecode) {
			return err
		}
		var werr error
		if asJSON {
			views := make([]client.SessionView, len(recs))
			for i, r := range recs {
				views[i] = client.NewSessionView(r)
			}
			werr = writeJSON(cmd.OutOrStdout(), views)
		} else {
			werr = printSessionsTable(cmd.OutOrStdout(), recs)
		}
		return cmp.Or(werr, err)
	}
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List, show, fork and delete sessions",
		Long: `A session is one conversation with its workspace and the agent's home,
spread over runs: jobs with "session": "<id>" (baton submit --session).
Each run of a session starts from its last checkpoint, on any node, and at
most one runs at a time. With no subcommand, sessions lists them, the one
used last first; --label keeps those with every label given.`,
		Example: `  baton sessions
  baton sessions list --label user=u42 --json
  baton sessions get chat-7
  baton sessions fork chat-7 --as chat-7-b --checkpoint 3
  baton sessions delete chat-7-b`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	listCmd := &cobra.Command{Use: "list", Short: "List sessions, the one used last first", Args: cobra.NoArgs, RunE: list}
	for _, c := range []*cobra.Command{cmd, listCmd} {
		c.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE: only sessions with this label (repeatable: all of them)")
	}
	var as string
	var at int
	var forkLabels []string
	fork := &cobra.Command{
		Use:   "fork SESSION --as NEW",
		Short: "Make a new session from a checkpoint of one, without copying it",
		Long: `fork makes the session NEW start from a checkpoint of SESSION (its head,
or --checkpoint N, a number 'baton sessions get' lists): NEW's first run
sees the workspace and home as they were there, and the two go their own
ways. Nothing is copied; SESSION keeps the checkpoint while NEW uses it.`,
		Example: `  baton sessions fork chat-7 --as chat-7-b
  baton sessions fork chat-7 --as chat-7-c --checkpoint 2 --label try=c`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lbl, err := parseAssignments("--label", forkLabels)
			if err != nil {
				return err
			}
			req := protocol.SessionForkRequest{As: as, Labels: lbl}
			if cmd.Flags().Changed("checkpoint") {
				req.Checkpoint = &at
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			v, err := s.c.ForkSession(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "forked session %s from checkpoint %d of %s\n", v.ID, v.ForkedFrom.Checkpoint, args[0])
			return err
		},
	}
	fork.Flags().StringVar(&as, "as", "", "the new session's id (required)")
	fork.Flags().IntVar(&at, "checkpoint", 0, "the checkpoint to fork from (default: the head)")
	fork.Flags().StringArrayVar(&forkLabels, "label", nil, "KEY=VALUE: a label to add to those the new session inherits (repeatable)")
	_ = fork.MarkFlagRequired("as")
	cmd.AddCommand(listCmd, fork, &cobra.Command{
		Use:   "get SESSION",
		Short: "Show a session: its runs, checkpoints and state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			rec, err := s.c.Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), client.NewSessionView(rec))
			}
			return printSession(cmd.OutOrStdout(), rec)
		},
	}, &cobra.Command{
		Use:   "delete SESSION",
		Short: "Delete a session and the checkpoints only it uses",
		Long: `delete removes SESSION's record and its checkpoints, but those a fork
of it still uses (they go with the fork). A session with a live run is
refused: cancel the run first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			if err := s.c.DeleteSession(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted session %s\n", args[0])
			return err
		},
	})
	return cmd
}

func printSessionsTable(w io.Writer, recs []kv.SessionRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tPROFILE\tRUNS\tLIVE RUN\tHEAD\tUPDATED")
	for _, r := range recs {
		head := "-"
		if h := r.Head(); h != nil {
			head = fmt.Sprintf("#%d (%d files, %s)", h.N, h.Files, byteSize(h.TreeBytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(r.ID), cell(string(r.State)), cell(r.Profile), r.RunCount,
			cell(r.Live), head, fmtTime(r.UpdatedAt))
	}
	return tw.Flush()
}

func printSession(w io.Writer, r kv.SessionRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Session", r.ID)
	row("State", cell(string(r.State)))
	row("Profile", cell(r.Profile))
	row("Live run", cell(r.Live))
	row("Runs", fmt.Sprint(r.RunCount))
	if f := r.ForkedFrom; f != nil {
		row("Forked from", fmt.Sprintf("%s, checkpoint %d", f.Session, f.Checkpoint))
	}
	row("Lost run", cell(r.LostRun))
	row("Checkpoint error", cell(r.CheckpointError))
	row("Usage", fmtUsage(r.Usage)+" (its ended runs)")
	row("Created", fmtTime(r.CreatedAt))
	row("Updated", fmtTime(r.UpdatedAt))
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		row("Label "+sanitize([]byte(k), false), sanitize([]byte(r.Labels[k]), false))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nCheckpoints (the last is the head):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  N\tRUN\tFILES\tTREE\tSTORED\tKIND\tCREATED")
	for _, c := range r.Checkpoints {
		kind := "delta"
		switch {
		case c.Setup:
			kind = "after setup"
		case len(c.Chain) == 1:
			kind = "base"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\t%s\n", c.N, cell(c.Run), c.Files, byteSize(c.TreeBytes), byteSize(int64(c.Size)), kind, fmtTime(c.Created))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nRuns, in order (the last %d of %d):\n", len(r.Runs), r.RunCount)
	for _, id := range r.Runs {
		if _, err := fmt.Fprintf(w, "  %s\n", sanitize([]byte(id), false)); err != nil {
			return err
		}
	}
	return nil
}
