package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
)

func newAttachCmd(g *globals) *cobra.Command {
	var asJSON, streamJSON bool
	cmd := &cobra.Command{
		Use:   "attach RUNID",
		Short: "Follow a run live and send each line typed as input",
		Long: `attach follows a run like 'baton watch' (from its start, until its
terminal status) and sends each line read from stdin to the agent's stdin,
as 'baton send' does (the run's profile needs "stdin: stream"). At the end
of this command's stdin (Ctrl-D) it closes the agent's stdin, as
'baton send --eof' does, and follows the run to its end. Ctrl-C detaches:
the run goes on.

--stream-json wraps each line as a Claude Code stream-json user message.
Its exit status is watch's.`,
		Example: `  baton attach run-5kq2m8x3c1v7b0n4d6fa

  # A Claude Code stream-json run: each line typed is a user message
  baton attach run-5kq2m8x3c1v7b0n4d6fa --stream-json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			return s.attach(cmd.Context(), args[0], cmd.InOrStdin(), streamJSON, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&streamJSON, "stream-json", false, "wrap each line as a Claude Code stream-json user message")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each payload unchanged, one per line")
	return cmd
}

// attachWaitRecord bounds how long attach retries input to a run that has
// no record yet (just submitted: no worker has taken the job).
const attachWaitRecord = 30 * time.Second

// attach watches runID and sends in's lines to it, then end of input.
func (s *session) attach(ctx context.Context, runID string, in io.Reader, streamJSON, asJSON bool, out, errOut io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := &prompts{}
	policyAsks := &asks{}
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data := sc.Bytes()
			if policyAsks.answer(ctx, s.c, runID, sc.Text(), errOut) {
				continue // y or n to the approval shown: 'baton approve'
			}
			if reply := pending.reply(sc.Text()); reply != nil {
				data = reply // y or n to the permission prompt shown
			} else if streamJSON {
				data = client.StreamJSONUserMessage(sc.Text())
			}
			if err := s.sendWhenKnown(ctx, runID, data); err != nil {
				fmt.Fprintf(errOut, "baton: %v\n", err)
			}
		}
		if ctx.Err() == nil {
			if err := s.sendWhenKnown(ctx, runID, nil, client.WithEOF()); err != nil && !errors.Is(err, client.ErrTerminal) {
				fmt.Fprintf(errOut, "baton: %v\n", err)
			}
		}
	}()
	p := &eventPrinter{w: out, json: asJSON, color: useColor(out), prompts: pending, asks: policyAsks}
	return s.follow(ctx, runID, time.Time{}, p, errOut)
}

// sendWhenKnown sends data, waiting up to attachWaitRecord for a run just
// submitted to get its record.
func (s *session) sendWhenKnown(ctx context.Context, runID string, data []byte, opts ...client.SendOption) error {
	return whenKnown(ctx, attachWaitRecord, func() error {
		_, err := s.c.Send(ctx, runID, data, opts...)
		return err
	})
}

// sendWaitRecord bounds how long send and interrupt retry a run that has no
// record: one submitted a moment before gets it as soon as a worker takes
// its job, and a mistyped run id is still told soon.
const sendWaitRecord = 5 * time.Second

// whenKnown calls try until it returns anything but ErrNotFound, for up to
// wait.
func whenKnown(ctx context.Context, wait time.Duration, try func() error) error {
	end := time.Now().Add(wait)
	for {
		err := try()
		if !errors.Is(err, client.ErrNotFound) || time.Now().After(end) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
