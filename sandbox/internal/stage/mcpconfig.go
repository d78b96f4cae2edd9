package stage

import (
	"encoding/json"
	"strconv"
)

// Generated files of the agent's /etc for a run with tools: its MCP
// server's config for Claude Code (--mcp-config) and Codex (the
// [mcp_servers.baton] section of a config.toml). Flat names: the agent's
// /etc has no generated subdirectory.
const (
	MCPConfigName   = "baton-mcp.json"
	CodexConfigName = "baton-codex.toml"
)

// mcpConfigFiles are the two configs, for baton at command.
func mcpConfigFiles(command string) map[string]string {
	claude, _ := json.MarshalIndent(map[string]any{
		"mcpServers": map[string]any{"baton": map[string]any{"type": "stdio", "command": command, "args": []string{"mcp"}}},
	}, "", "  ")
	codex := "# baton's host tools: the MCP server of this run (docs/tools.md)\n" +
		"[mcp_servers.baton]\ncommand = " + strconv.Quote(command) + "\nargs = [\"mcp\"]\n"
	return map[string]string{MCPConfigName: string(claude) + "\n", CodexConfigName: codex}
}
