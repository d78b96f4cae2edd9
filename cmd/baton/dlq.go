package main

import (
	"fmt"
	"io"
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
the payload. With no subcommand it lists them.`,
		Example: `  baton dlq
  baton dlq list --limit 5
  baton dlq list --json | jq -r '.[].error'`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().IntVar(&limit, "limit", 20, "show at most this many entries, newest first (0: all)")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List rejected jobs, newest first",
		Example: `  baton dlq list --limit 50
  baton dlq list --json`,
		Args: cobra.NoArgs,
		RunE: list,
	})
	return cmd
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
