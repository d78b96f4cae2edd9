package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

func newSendCmd(g *globals) *cobra.Command {
	var streamJSON, eof bool
	var sessionID string
	cmd := &cobra.Command{
		Use:   "send RUNID [TEXT|-] | send --session SESSION [TEXT|-]",
		Short: "Send input to a running agent's stdin",
		Long: `send sends TEXT (or, with "-", all of stdin) to the stdin of a running
agent whose profile has "stdin: stream". A worker (on <prefix>.input.<runId>)
checks the run and the message and stores it; the run's runner writes it to
the agent's stdin exactly once, as one line (a newline is added if missing),
after everything sent before it, whichever worker holds the run meanwhile.
The run's chain shows it as an ".input" message where it went in.

--stream-json wraps the text as a Claude Code stream-json user message.
--eof closes the agent's stdin after this message (TEXT may then be
omitted): the agent reads end of input after everything sent before it.

It prints the message's sequence in the input stream (BATON_INPUT), the
Baton-Input-Seq of its input message on the chain: the stream is every
run's, so the numbers grow across runs and do not count this run's inputs.

A run just submitted is waited for, up to 5 s, until a worker has taken
its job. A run that does not exist by then, has ended, takes no input
(stdin "once") or whose stdin was closed, and a message over maxInputBytes,
are refused with an error.

--session sends to a session instead of a run: its live run gets the
message as input when it can take it, and a session with no live run
(paused, or idle) starts its next run with the message as the job's input
(docs/sessions.md); it prints which run got it.`,
		Example: `  baton send run-5kq2m8x3c1v7b0n4d6fa 'also update the changelog'

  # A Claude Code stream-json run: the text as a user message
  baton send run-5kq2m8x3c1v7b0n4d6fa --stream-json 'now run the tests'

  # Answer a can_use_tool permission prompt (the line as is), from a file
  baton send run-5kq2m8x3c1v7b0n4d6fa - < allow.json

  # Close the agent's stdin: it ends once it has read everything
  baton send run-5kq2m8x3c1v7b0n4d6fa --eof

  # A session: its live run, or the next run of a paused one
  baton send --session chat-7 --stream-json 'and the other failing test?'`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sessionID != "" {
				// The session takes the place of RUNID.
				args = append([]string{sessionID}, args...)
			}
			if len(args) == 0 || len(args) > 2 {
				return errors.New("send: give RUNID (or --session SESSION), then TEXT or -")
			}
			if len(args) == 1 && !eof {
				return errors.New("send: give TEXT, or - to read stdin (or --eof alone to close the agent's stdin)")
			}
			var data []byte
			if len(args) == 2 {
				text := args[1]
				if text == "-" {
					b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxStdinInput+1))
					if err != nil {
						return fmt.Errorf("send: read stdin: %w", err)
					}
					if len(b) > maxStdinInput {
						return fmt.Errorf("send: stdin is over %d bytes", maxStdinInput)
					}
					text = string(b)
				}
				data = []byte(text)
				if streamJSON {
					data = client.StreamJSONUserMessage(strings.TrimSuffix(text, "\n"))
				}
			}
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			var opts []client.SendOption
			if eof {
				opts = append(opts, client.WithEOF())
			}
			if sessionID != "" {
				// One id for the request: a retry of it starts no second run.
				rep, err := s.c.SendSession(cmd.Context(), sessionID, data, append(opts, client.WithMsgID(protocol.NewRunID()))...)
				if err != nil {
					return err
				}
				if rep.Started {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "session %s: started run %s with the message (baton watch %s)\n", rep.Session, rep.RunID, rep.RunID)
				} else {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "sent to session %s's run %s (BATON_INPUT seq %d)\n", rep.Session, rep.RunID, rep.Seq)
				}
				return err
			}
			var rep protocol.InputReply
			err = whenKnown(cmd.Context(), sendWaitRecord, func() (err error) {
				rep, err = s.c.Send(cmd.Context(), args[0], data, opts...)
				return err
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "sent to run %s (BATON_INPUT seq %d)\n", rep.RunID, rep.Seq)
			return err
		},
	}
	cmd.Flags().BoolVar(&streamJSON, "stream-json", false, "wrap the text as a Claude Code stream-json user message")
	cmd.Flags().BoolVar(&eof, "eof", false, "close the agent's stdin after this message")
	cmd.Flags().StringVar(&sessionID, "session", "", "send to this session: its live run, or a new run of it")
	return cmd
}

// maxStdinInput bounds what send reads from stdin: more than any
// maxInputBytes allows, so the worker's refusal says why.
const maxStdinInput = 1 << 20
