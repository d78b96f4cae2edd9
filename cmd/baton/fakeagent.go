package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/fakeagent"
)

func newFakeAgentCmd(_ *globals) *cobra.Command {
	var o fakeagent.Options
	cmd := &cobra.Command{
		Use:   "fake-agent",
		Short: "Write a realistic agent NDJSON stream, for demos, tests and benchmarks",
		Long: `fake-agent stands in for an AI agent CLI. It writes an NDJSON stream shaped
like Claude Code's --output-format stream-json: a system/init event, turns
of text deltas, tool_use and tool_result messages, and a final result event.
The same --seed gives the same bytes. Each line is written in one write.

On SIGINT, SIGTERM or SIGHUP it stops after its last whole line and dies by
that signal.`,
		Example: `  # the demo's session, told once, 25 lines a second
  baton fake-agent --story --rate 25

  # five lines, two a second
  baton fake-agent --lines 5 --rate 2

  # 200,000 lines of 200 bytes, as fast as the reader takes them
  baton fake-agent --lines 200000 --line-size 200 > /dev/null

  # two seconds of CPU first, a known figure for a run's usage
  baton fake-agent --burn 2s --lines 10

  # end with exit status 3 and a message on stderr
  baton fake-agent --exit-code 3 --stderr "boom"

  # die by SIGKILL after the stream
  baton fake-agent --lines 10 --signal KILL

  # stream for a minute at 1,000 lines a second
  baton fake-agent --duration 1m --rate 1000

  # echo stdin into the init event; mix in non-JSON lines and a forged sentinel
  echo "fix the bug" | baton fake-agent --echo-input --raw-every 5 --forge-sentinel

  # an MCP client of the run's host tools (profile tools: [deploy]): 100 calls, their round trips
  baton fake-agent --mcp-calls 100 --mcp-tool deploy

  # converse: one turn per stdin line, a permission prompt for "approve: CMD"
  printf 'hello\napprove: make test\n{"type":"control_response","response":{"subtype":"success","request_id":"req-2","response":{"behavior":"allow"}}}\n' | baton fake-agent --chat`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A job's --lines or --duration after a profile's --story
			// (the demo's) asks for a stream of that size: it wins.
			if cmd.Flags().Changed("lines") || cmd.Flags().Changed("duration") {
				o.Story = false
			}
			return runFakeAgent(o)
		},
	}
	o.RegisterFlags(cmd.Flags())
	return cmd
}

func runFakeAgent(o fakeagent.Options) error {
	if o.Chat {
		return runFakeChat()
	}
	if o.MCPCalls > 0 {
		// This binary's `mcp`: in a sandbox, the run's host tools.
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return fakeagent.MCPClient(context.Background(), os.Stdout, []string{self, "mcp"}, o.MCPTool, o.MCPCalls)
	}
	// main's context ends on SIGINT and SIGTERM too, but does not say which
	// signal came; the fake agent dies by the one it got, as a real agent
	// would, after its last whole line.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	go func() {
		select {
		case s := <-sigc:
			cancel(&fakeagent.ExitError{Signal: fakeagent.SignalName(s.(syscall.Signal))})
		case <-ctx.Done():
		}
	}()

	err := fakeagent.Run(ctx, os.Stdin, os.Stdout, os.Stderr, o)
	var ee *fakeagent.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ee.Signal != "" {
		sig, err := fakeagent.ParseSignal(ee.Signal)
		if err != nil {
			return err
		}
		return fakeagent.Die(sig)
	}
	return exitCodeError(ee.Code)
}

// runFakeChat runs the conversation mode: SIGINT interrupts the current
// turn and the agent goes on; SIGTERM and SIGHUP end it by that signal.
func runFakeChat() error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	interrupts := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case s := <-sigc:
				if s == syscall.SIGINT {
					select {
					case interrupts <- struct{}{}:
					default:
					}
					continue
				}
				cancel(&fakeagent.ExitError{Signal: fakeagent.SignalName(s.(syscall.Signal))})
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	err := fakeagent.Chat(ctx, os.Stdin, os.Stdout, interrupts)
	var ee *fakeagent.ExitError
	if errors.As(err, &ee) {
		sig, perr := fakeagent.ParseSignal(ee.Signal)
		if perr != nil {
			return perr
		}
		return fakeagent.Die(sig)
	}
	return err
}
