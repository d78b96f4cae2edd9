// Package mcp is the MCP server the agent finds in its sandbox (`baton
// mcp`): MCP's JSON-RPC 2.0 over stdio, one JSON message a line, as
// Claude Code's and Codex's stdio MCP clients speak it (protocol version
// 2024-11-05: initialize, ping, tools/list, tools/call). It lists and calls
// the run's host tools through a Backend; Dial's backend asks runner-outer
// on the sandbox's tools socket, which journals each call and hands it to
// the worker, which asks the tool's NATS service (docs/tools.md).
//
// It uses the standard library only: baton-runner links it.
package mcp
