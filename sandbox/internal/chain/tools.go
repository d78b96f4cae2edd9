package chain

import (
	"encoding/json"
	"time"

	"github.com/batonhq/baton/mcp"
)

// Generated files of the agent's /etc for a run with tools: its MCP
// server's config for Claude Code (--mcp-config) and Codex (the
// [mcp_servers.baton] section of a config.toml). Flat names: the agent's
// /etc has no generated subdirectory. MCPConfigEnv names the first in
// the agent's environment.
const (
	MCPConfigName   = "baton-mcp.json"
	CodexConfigName = "baton-codex.toml"
	MCPConfigEnv    = "BATON_MCP_CONFIG"
)

// ToolRequest is what runner-outer hands a worker on the tools socket:
// a call the agent made (Call, its number in the run) or a list request
// (List, its number on this runner). Every connected worker is handed
// every request still unanswered, so one that attaches after a hand-off
// or a crash picks up the calls in flight.
type ToolRequest struct {
	Call uint64          `json:"call,omitempty"`
	List uint64          `json:"list,omitempty"`
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Deadline is when runner-outer stops waiting and answers the agent
	// with a timeout itself: the worker's request need not outlast it.
	Deadline time.Time `json:"deadline"`
}

// ToolReply is a worker's answer to a ToolRequest: the tools, for a list;
// for a call, the tool's answer or why there is none.
type ToolReply struct {
	Call   uint64     `json:"call,omitempty"`
	List   uint64     `json:"list,omitempty"`
	Tools  []mcp.Tool `json:"tools,omitempty"`
	Result []byte     `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
}
