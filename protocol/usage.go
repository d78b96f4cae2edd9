package protocol

// Usage is what a run used: the bill its terminal status and its record
// carry (docs/protocol.md, "Usage"). The worker that ends the run counts
// it from the run's journal and its runner's sentinel, so every holder,
// a successor after hand-offs or crashes included, arrives at the same
// figures. The tags serve the status (JSON) and the records (msgpack).
type Usage struct {
	// WallSeconds runs from the run's start to its end.
	WallSeconds float64 `json:"wallSeconds" msgpack:"wallSeconds"`
	// CPUSeconds is the agent's CPU time, user and system together, as
	// the kernel accounted it to the agent and the processes it waited
	// for; CPUUserSeconds and CPUSystemSeconds are its parts.
	CPUSeconds       float64 `json:"cpuSeconds" msgpack:"cpuSeconds"`
	CPUUserSeconds   float64 `json:"cpuUserSeconds" msgpack:"cpuUserSeconds"`
	CPUSystemSeconds float64 `json:"cpuSystemSeconds" msgpack:"cpuSystemSeconds"`
	// MaxRSSBytes is the peak resident memory of the agent or of the
	// largest process it waited for.
	MaxRSSBytes int64 `json:"maxRssBytes" msgpack:"maxRssBytes"`
	// StdoutBytes and Lines are what the agent printed, as journaled
	// (newlines included); runner records and the sentinel are not.
	StdoutBytes int64 `json:"stdoutBytes" msgpack:"stdoutBytes"`
	Lines       int64 `json:"lines" msgpack:"lines"`
	// Inputs counts the input messages written to the agent's stdin.
	Inputs int64 `json:"inputs" msgpack:"inputs"`
	// EgressBytes is what the agent sent and received through the
	// egress proxy.
	EgressBytes int64 `json:"egressBytes" msgpack:"egressBytes"`
	// OutputsBytes and CheckpointBytes are what the run stored: its
	// outputs, and the checkpoint of a session's run.
	OutputsBytes    int64 `json:"outputsBytes" msgpack:"outputsBytes"`
	CheckpointBytes int64 `json:"checkpointBytes" msgpack:"checkpointBytes"`
	// Agent is what the agent itself reported.
	Agent AgentUsage `json:"agent" msgpack:"agent"`
}

// AgentUsage is what an agent reports of its model use on its own lines
// (Claude Code's result lines, Codex's token usage): zero for an agent
// that reports none. InputTokens are the input tokens read without the
// cache, CacheTokens those read from or written to it.
type AgentUsage struct {
	InputTokens  int64 `json:"inputTokens" msgpack:"inputTokens"`
	OutputTokens int64 `json:"outputTokens" msgpack:"outputTokens"`
	CacheTokens  int64 `json:"cacheTokens" msgpack:"cacheTokens"`
	// CostUSD is the agent's own estimate (Claude Code's
	// total_cost_usd); 0 when it gives none.
	CostUSD float64 `json:"costUsd" msgpack:"costUsd"`
}

// Add adds o to u: what a session, or a report over many runs, sums.
// Peak memory is the larger of the two, not a sum.
func (u *Usage) Add(o Usage) {
	u.WallSeconds += o.WallSeconds
	u.CPUSeconds += o.CPUSeconds
	u.CPUUserSeconds += o.CPUUserSeconds
	u.CPUSystemSeconds += o.CPUSystemSeconds
	u.MaxRSSBytes = max(u.MaxRSSBytes, o.MaxRSSBytes)
	u.StdoutBytes += o.StdoutBytes
	u.Lines += o.Lines
	u.Inputs += o.Inputs
	u.EgressBytes += o.EgressBytes
	u.OutputsBytes += o.OutputsBytes
	u.CheckpointBytes += o.CheckpointBytes
	u.Agent.Add(o.Agent)
}

// Add adds o to a.
func (a *AgentUsage) Add(o AgentUsage) {
	a.InputTokens += o.InputTokens
	a.OutputTokens += o.OutputTokens
	a.CacheTokens += o.CacheTokens
	a.CostUSD += o.CostUSD
}
