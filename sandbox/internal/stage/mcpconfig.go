package stage

import (
	"encoding/json"
	"strconv"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

// mcpConfigFiles are the two configs, for baton at command.
func mcpConfigFiles(command string) map[string]string {
	claude, _ := json.MarshalIndent(map[string]any{
		"mcpServers": map[string]any{"baton": map[string]any{"type": "stdio", "command": command, "args": []string{"mcp"}}},
	}, "", "  ")
	codex := "# baton's host tools: the MCP server of this run (docs/tools.md)\n" +
		"[mcp_servers.baton]\ncommand = " + strconv.Quote(command) + "\nargs = [\"mcp\"]\n"
	return map[string]string{chain.MCPConfigName: string(claude) + "\n", chain.CodexConfigName: codex}
}
