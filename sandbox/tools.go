package sandbox

import "github.com/batonhq/baton/sandbox/internal/chain"

// ToolRequest is a host tool call (or a list request) the runner hands
// the worker on the run's tools socket (package internal/chain has its
// fields: the runner writes it).
type ToolRequest = chain.ToolRequest

// ToolReply is the worker's answer to a ToolRequest.
type ToolReply = chain.ToolReply
