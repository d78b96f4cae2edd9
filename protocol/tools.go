package protocol

import "encoding/json"

// KindTool is the chain's tool messages: each host tool call the agent
// made and its answer, as the runner journaled them (ToolMessage).
const KindTool RunKind = "tool"

// ToolSubject is the NATS service endpoint of host tool name:
// "<prefix>.tools.<name>". The product serves it (a NATS micro service,
// any language); workers ask it.
func (n Names) ToolSubject(name string) string { return n.prefix + ".tools." + name }

// ToolSubjects matches every tool endpoint ("<prefix>.tools.>"): what the
// tools user of deploy/nats-auth.conf may serve.
func (n Names) ToolSubjects() string { return n.prefix + ".tools.>" }

// Headers of a tool request, set by the worker (never by the agent, which
// supplies only the tool's name and arguments).
const (
	HeaderToolRunID   = "Baton-Run-Id"
	HeaderToolSession = "Baton-Session"
	HeaderToolProfile = "Baton-Profile"
	// HeaderToolLabels is the run's labels, a JSON object.
	HeaderToolLabels = "Baton-Labels"
	// HeaderToolCall is the call's number in its run, from 1.
	HeaderToolCall = "Baton-Tool-Call"
	// HeaderIdempotencyKey is "<runId>:<call>": the same for every request
	// of one call (a worker that takes a run over asks again a call still
	// unanswered), different for every other call. A service executes a
	// key once and answers a repeated key with the first answer.
	HeaderIdempotencyKey = "Baton-Idempotency-Key"
)

// ToolsDiscoveryInbox prefixes the reply subjects of a worker's tool
// discovery ($SRV.INFO): within the workers' inbox, the one place the
// worker-svc user of deploy/nats-auth.conf may answer into there (its own
// micro service answers every $SRV.INFO too).
const ToolsDiscoveryInbox = WorkerInboxPrefix + ".srv"

// Endpoint metadata keys a tool's service sets, which tools/list shows.
const (
	ToolMetaDescription = "description"
	ToolMetaSchema      = "schema" // a JSON schema of the arguments, as a string
)

// ToolMessage is the payload of a chain message of kind "tool": a call
// (Phase "call", Args) or its answer (Phase "result", Result or Error).
// Result is the service's reply as text; Truncated says the chain holds
// only its first bytes (the agent got all of it).
type ToolMessage struct {
	Call      uint64          `json:"call"`
	Phase     string          `json:"phase"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	Result    *string         `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}
