package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

func newApproveCmd(g *globals) *cobra.Command {
	var deny bool
	var message, by string
	cmd := &cobra.Command{
		Use:   "approve RUNID ID [--deny] [--message TEXT] [--by NAME]",
		Short: "Allow (or deny) a permission prompt the run's policy asks a person about",
		Long: `approve answers a permission prompt of a run whose profile has a policy,
when the policy asked a person (verdict "ask"): 'baton approvals list
--pending' lists them, and 'baton watch' shows each with its id. A worker
(on <prefix>.control.approve.<runId>) decides it, once, in the approval's
record; the run's worker writes the answer to the agent's stdin, and the
run's chain shows it as a decision input. It allows, or with --deny
denies, giving the agent --message as the reason. --by names who decides
(default: your user name), kept in the record and on the chain.

An approval is answered once: a second answer, or one the policy decided,
is refused, saying who decided it and when. An approval nobody answered
within the profile's askTimeout was held (the agent was told it awaits
approval): allowing it later sends the agent a turn asking it to retry.
A run that ended, an unknown id, and no worker answering within 10 s are
errors too.`,
		Example: `  baton approve run-5kq2m8x3c1v7b0n4d6fa 512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f
  baton approve run-5kq2m8x3c1v7b0n4d6fa 512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f --deny --message 'not on main; open a PR'

  # Every pending approval of a run, allowed
  baton approvals list --pending --run run-5kq2m8x3c1v7b0n4d6fa --json | jq -r '.[].id' |
    xargs -n1 baton approve run-5kq2m8x3c1v7b0n4d6fa`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if message != "" && !deny {
				return errors.New("approve: --message is a denial's reason: give --deny with it")
			}
			runID, id := args[0], args[1]
			opts := []client.ApproveOption{client.WithDecidedBy(cmp.Or(by, currentUser()))}
			if deny {
				opts = append(opts, client.WithDeny(message))
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			a, err := s.c.Approve(cmd.Context(), runID, id, opts...)
			if err != nil {
				return approveError(runID, id, a, err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), approvedLine(a))
			return err
		},
	}
	cmd.Flags().BoolVar(&deny, "deny", false, "deny the request (default: allow it)")
	cmd.Flags().StringVar(&message, "message", "", "with --deny: the reason the agent is given")
	cmd.Flags().StringVar(&by, "by", "", "who decides, kept in the record (default: your user name)")
	return cmd
}

// currentUser names who runs the command: "" when unknown (the worker then
// writes "human").
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// approvedLine says what approve decided.
func approvedLine(a protocol.Approval) string {
	s := fmt.Sprintf("%s %s of run %s (%s)", a.State, cell(a.ID), a.RunID, approvalWhat(a))
	switch {
	case a.State == protocol.ApprovalDenied && a.Message != "":
		s += ": " + sanitize([]byte(a.Message), false)
	case a.State == protocol.ApprovalAllowed && a.HeldAt != nil:
		s += "; it was held, so the agent is asked to retry it"
	}
	return s
}

// approvalWhat is an approval's tool and target, for a person.
func approvalWhat(a protocol.Approval) string {
	if a.Target == "" {
		return cell(a.Tool)
	}
	return cell(a.Tool) + ": " + cut(sanitize([]byte(a.Target), false), 120)
}

// approveError says why approve was refused: a conflict names who decided
// before, and when.
func approveError(runID, id string, a protocol.Approval, err error) error {
	// The worker's sentence, without the client's sentinel before it.
	said := func(sentinel error) string { return strings.TrimPrefix(err.Error(), sentinel.Error()+": ") }
	switch {
	case errors.Is(err, client.ErrApprovalConflict):
		if a.DecidedBy == "" {
			return errors.New(said(client.ErrApprovalConflict))
		}
		return fmt.Errorf("approval %s of run %s was decided before: %s", id, runID, decidedText(a))
	case errors.Is(err, client.ErrApprovalNotFound):
		return fmt.Errorf("%s ('baton approvals list --run %s' lists its approvals)", said(client.ErrApprovalNotFound), runID)
	case errors.Is(err, client.ErrRunEnded):
		return fmt.Errorf("run %s ended: nothing waits on approval %s any more", runID, id)
	}
	return err
}

// decidedText says how an approval was decided: "allowed by alice at
// 2026-12-05 15:30:02 UTC", with the policy's rule when it decided.
func decidedText(a protocol.Approval) string {
	s := a.State + " by " + sanitize([]byte(a.DecidedBy), false)
	if a.DecidedBy == protocol.DecidedByPolicy && a.Rule != "" {
		s += " (" + sanitize([]byte(a.Rule), false) + ")"
	}
	if a.DecidedAt != nil {
		s += " at " + fmtTime(*a.DecidedAt)
	}
	if a.State == protocol.ApprovalDenied && a.Message != "" {
		s += ": " + sanitize([]byte(a.Message), false)
	}
	return s
}

func newApprovalsCmd(g *globals) *cobra.Command {
	var asJSON, pending bool
	var runID string
	var limit int
	list := func(cmd *cobra.Command, _ []string) error {
		s, err := openSession(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer s.close()
		rep, err := s.c.Approvals(cmd.Context(), protocol.ApprovalsQuery{RunID: runID, Pending: pending, Limit: limit})
		if err != nil {
			return err
		}
		if rep.Truncated {
			fmt.Fprintf(cmd.ErrOrStderr(), "baton: more approvals matched than the %d listed\n", len(rep.Approvals))
		}
		switch {
		case asJSON:
			if rep.Approvals == nil {
				rep.Approvals = []protocol.Approval{}
			}
			return writeJSON(cmd.OutOrStdout(), rep.Approvals)
		case len(rep.Approvals) == 0:
			what := "approvals"
			if pending {
				what = "pending approvals"
			}
			if runID != "" {
				what += " of run " + runID
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "no %s\n", what)
			return err
		}
		return printApprovals(cmd.OutOrStdout(), rep.Approvals)
	}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the permission prompts of runs with a policy, and what became of them",
		Long: `approvals lists the approval records the workers keep: every permission
prompt of a run whose profile has a policy, oldest first, with the tool and
what it acts on, the policy's verdict and the rule that matched, its state
(pending, allowed, denied; "held" when the agent was told it awaits
approval), when it was asked and who decided it (the policy, or a person).
--pending keeps those waiting for a person ('baton approve' answers them),
--run one run's.`,
		Example: `  baton approvals list --pending
  baton approvals list --run run-5kq2m8x3c1v7b0n4d6fa
  baton approvals list --pending --json | jq -r '.[] | "\(.runId) \(.id)"'`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the records as JSON instead of a table")
	cmd.PersistentFlags().BoolVar(&pending, "pending", false, "only the approvals waiting for a person")
	cmd.PersistentFlags().StringVar(&runID, "run", "", "only this run's approvals")
	cmd.PersistentFlags().IntVar(&limit, "limit", 0, "at most this many (0: the workers' bound)")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List approvals, oldest ask first",
		Example: `  baton approvals list --pending
  baton approvals list --run run-5kq2m8x3c1v7b0n4d6fa --json`,
		Args: cobra.NoArgs,
		RunE: list,
	})
	return cmd
}

// printApprovals is the approvals table.
func printApprovals(w io.Writer, as []protocol.Approval) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tID\tTOOL\tTARGET\tVERDICT/RULE\tSTATE\tASKED\tDECIDED BY")
	for _, a := range as {
		rule := cmp.Or(a.Rule, a.Verdict)
		state := a.State
		if a.State == protocol.ApprovalPending && a.HeldAt != nil {
			state += " (held)"
		}
		by := cell(a.DecidedBy)
		if a.DecidedAt != nil {
			by += " " + a.DecidedAt.Local().Format("15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.RunID, cell(a.ID), cell(a.Tool),
			cell(cut(strings.ReplaceAll(a.Target, "\n", " "), 60)), cell(rule), cell(state), fmtTime(a.AskedAt), by)
	}
	return tw.Flush()
}
