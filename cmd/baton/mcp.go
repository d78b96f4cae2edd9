package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/mcp"
	"github.com/batonhq/baton/worker"
)

func newMCPCmd(_ *globals) *cobra.Command {
	addr := mcp.SocketAddr
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the run's host tools to the agent as an MCP stdio server (inside a sandbox)",
		Long: `mcp is the MCP server an agent finds in its sandbox when its profile lists
tools: MCP's JSON-RPC over stdin and stdout, one message a line (protocol
2024-11-05). tools/list lists the run's tools; tools/call hands the call to
the run's runner on the sandbox's tools socket, which journals it and has
the worker ask the tool's NATS service, and answers with its result.

Claude Code: --mcp-config /etc/baton-mcp.json. Codex: the [mcp_servers.baton]
section in /etc/baton-codex.toml. See docs/tools.md.`,
		Example: `  # what Claude Code runs for --mcp-config /etc/baton-mcp.json
  baton mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := mcp.NewServer(mcp.SocketBackend{Addr: addr}, mcp.WithVersion(worker.Version))
			done := make(chan error, 1)
			go func() { done <- s.Serve(cmd.Context(), os.Stdin, os.Stdout) }()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
				// SIGTERM or SIGINT: a read of stdin cannot be cut short;
				// the calls in flight are the runner's to answer or time out.
				return nil
			}
		},
	}
	cmd.Flags().StringVar(&addr, "socket", addr, "the tools socket (an abstract unix socket starts with @)")
	return cmd
}
