package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
)

func newDLQCmd(g *globals) *cobra.Command {
	var (
		limit  int
		asJSON bool
	)
	list := func(cmd *cobra.Command, _ []string) error {
		s, err := openSession(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer s.close()
		entries, err := s.c.DLQ(cmd.Context(), limit)
		if err != nil {
			return err
		}
		if asJSON {
			views := make([]dlqView, len(entries))
			for i, e := range entries {
				views[i] = newDLQView(e)
			}
			return writeJSON(cmd.OutOrStdout(), views)
		}
		return printDLQTable(cmd.OutOrStdout(), entries)
	}
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List rejected jobs from the dead-letter stream",
		Long: `dlq lists jobs that workers rejected (malformed JSON, unknown fields, bad
run ids, unknown profiles, arguments or environment the profile does not
allow, oversize payloads), newest first, with the reason and a preview of
the payload. With no subcommand it lists them. 'dlq retry SEQ' submits an
entry's job again (once a worker has the profile, say), 'dlq delete SEQ'
removes entries.`,
		Example: `  baton dlq
  baton dlq list --limit 5
  baton dlq list --json | jq -r '.[].error'
  baton dlq retry 42 && baton dlq delete 42`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List rejected jobs, newest first",
		Example: `  baton dlq list --limit 50
  baton dlq list --json`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	// On "dlq" and "dlq list", which list alike; retry and delete take none.
	for _, c := range []*cobra.Command{cmd, listCmd} {
		c.Flags().IntVar(&limit, "limit", 20, "show at most this many entries, newest first (0: all)")
	}
	cmd.AddCommand(listCmd, newDLQRetryCmd(g, &asJSON), newDLQDeleteCmd(g))
	return cmd
}

func newDLQRetryCmd(g *globals, asJSON *bool) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "retry SEQ",
		Short: "Submit a rejected job again, so that a worker runs it",
		Long: `retry submits the job of DLQ entry SEQ again, the same job, for a rejection
that a worker's configuration made (unknown_profile, not_allowed, some
invalid values) and that is fixed now. It keeps the job's run id: a
rejected job never started, so its id names no run, and 'baton watch
RUNID' follows the retry. An id that does name a run (a "duplicate"
entry, or a run started under the id since) would be rejected again,
and one whose run ran before (its record expired, its events are still
stored) would not start: retry refuses those and says why; --run-id
gives the same job a new id. An entry that holds only the start of its
job, or a job refused for its own content (malformed, unknown_field,
bad_run_id, oversize), cannot be retried as it is.

The entry stays in the DLQ ('baton dlq delete SEQ' removes it); retrying
it twice within the jobs stream's two-minute duplicates window submits
it once.`,
		Example: `  # The profile was missing; after adding it to the workers' config:
  baton dlq retry 42
  baton watch run-5kq2m8x3c1v7b0n4d6fa

  # A duplicate: run the same job under a new id
  baton dlq retry 43 --run-id nightly-2026-01-31-b --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq(args[0])
			if err != nil {
				return err
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			job, err := s.c.RetryDLQ(cmd.Context(), seq, runID)
			if errors.Is(err, client.ErrDuplicate) {
				return fmt.Errorf("DLQ entry %d was submitted again already, within the jobs stream's duplicates window: %w", seq, err)
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"seq": seq, "runId": job.RunID})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "submitted DLQ entry %d again as run %s\n", seq, job.RunID)
			return err
		},
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "submit the job under this run id instead of its own")
	return cmd
}

func newDLQDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete SEQ...",
		Short: "Remove entries from the dead-letter stream",
		Long: `delete removes DLQ entries by their sequence (the SEQ column of 'baton dlq').
It administers the DLQ stream through the JetStream API, so it needs an
administrator's NATS user: none of deploy/nats-auth.conf's users may (the
client's request is refused and goes unanswered, which it says).`,
		Example: `  baton dlq delete 42
  baton --nats nats://admin:$NATS_ADMIN_PASSWORD@nats:4222 dlq delete 42 43`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seqs := make([]uint64, len(args))
			for i, a := range args {
				var err error
				if seqs[i], err = parseSeq(a); err != nil {
					return err
				}
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			for _, seq := range seqs {
				if err := s.c.DeleteDLQ(cmd.Context(), seq); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted DLQ entry %d\n", seq)
			}
			return nil
		},
	}
}

// parseSeq reads a DLQ entry's sequence, as 'baton dlq' lists it.
func parseSeq(s string) (uint64, error) {
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("%q is not a DLQ sequence (the SEQ column of 'baton dlq', 1 or more)", s)
	}
	return seq, nil
}

// dlqView is a DLQ entry as JSON: the payload as text when it is UTF-8,
// else base64, so either way it round-trips.
type dlqView struct {
	Seq           uint64    `json:"seq"`
	Time          time.Time `json:"time"`
	Reason        string    `json:"reason"`
	Error         string    `json:"error"`
	Subject       string    `json:"subject,omitempty"`
	MsgID         string    `json:"msgId,omitempty"`
	Payload       string    `json:"payload,omitempty"`
	PayloadBase64 []byte    `json:"payloadBase64,omitempty"`
	// The job's size and digest when the payload is its first bytes only.
	Truncated int64  `json:"truncated,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

func newDLQView(e client.DLQEntry) dlqView {
	v := dlqView{
		Seq: e.Seq, Time: e.Time, Reason: string(e.Reason),
		Error: e.Error, Subject: e.Subject, MsgID: e.MsgID,
		Truncated: e.Truncated, Digest: e.Digest,
	}
	if utf8.Valid(e.Payload) {
		v.Payload = string(e.Payload)
	} else {
		v.PayloadBase64 = e.Payload
	}
	return v
}

func printDLQTable(w io.Writer, entries []client.DLQEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no rejected jobs: the dead-letter stream is empty")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tREASON\tERROR\tPAYLOAD")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, fmtTime(e.Time), cell(string(e.Reason)),
			cut(cell(e.Error), 80), truncatedMark(e)+payloadPreview(e.Payload, 60))
	}
	return tw.Flush()
}

// truncatedMark says that an entry holds only the start of its job.
func truncatedMark(e client.DLQEntry) string {
	if e.Truncated == 0 {
		return ""
	}
	return fmt.Sprintf("[%d of %d bytes] ", len(e.Payload), e.Truncated)
}

// payloadPreview is the start of a payload, escaped so that any bytes print
// safely on one line, and cut to n characters.
func payloadPreview(b []byte, n int) string {
	if len(b) == 0 {
		return "-"
	}
	// A rune is at most 4 bytes, so this keeps more than n runes whenever it
	// cuts, and cut then marks the cut.
	if len(b) > 4*(n+1) {
		b = b[:4*(n+1)]
	}
	return cut(sanitize(b, false), n)
}
