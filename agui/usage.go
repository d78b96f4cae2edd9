package agui

import (
	"bytes"
	"encoding/json"

	"github.com/batonhq/baton/protocol"
)

// UsageMeter sums what an agent reports of its model use on its events
// lines, in its dialect: Claude Code's result lines, Codex's token usage.
// Feed it every events line of a run, in order; the empty dialect sniffs
// each line until one tells. A line it cannot read counts nothing.
type UsageMeter struct {
	dialect Dialect
	sum     protocol.AgentUsage
	// Claude Code's total_cost_usd and modelUsage, and codex exec's
	// turn.completed usage, are running totals of the agent's process:
	// the meter adds what each line adds to the last, and takes a total
	// that fell for a new process's.
	last protocol.AgentUsage
}

// NewUsageMeter returns a meter for an agent of dialect d.
func NewUsageMeter(d Dialect) *UsageMeter { return &UsageMeter{dialect: d} }

// Usage is what the lines observed so far report.
func (m *UsageMeter) Usage() protocol.AgentUsage { return m.sum }

// Markers a line must hold to report usage: most lines skip the JSON
// decode.
var (
	claudeResult  = []byte(`"result"`)
	codexTurnDone = []byte(`"turn.completed"`)
	codexTokens   = []byte(`"thread/tokenUsage/updated"`)
)

// Observe reads one events line.
func (m *UsageMeter) Observe(line []byte) {
	d := m.dialect
	if d == "" {
		if !bytes.Contains(line, claudeResult) && !bytes.Contains(line, codexTurnDone) && !bytes.Contains(line, codexTokens) {
			return
		}
		if d = sniff(line); d == "" {
			return
		}
	}
	switch d {
	case DialectClaude:
		if bytes.Contains(line, claudeResult) {
			m.claude(line)
		}
	case DialectCodexExec:
		if bytes.Contains(line, codexTurnDone) {
			m.codexExec(line)
		}
	case DialectCodexAppServer:
		if bytes.Contains(line, codexTokens) {
			m.codexAppServer(line)
		}
	}
}

// claude reads a result line. Its usage counts the turn alone; its
// modelUsage (every model the turn used, subagents' included) and
// total_cost_usd the process so far, so the meter takes those when the
// line has them.
func (m *UsageMeter) claude(line []byte) {
	var r struct {
		Type  string   `json:"type"`
		Cost  *float64 `json:"total_cost_usd"`
		Usage *struct {
			Input       int64 `json:"input_tokens"`
			Output      int64 `json:"output_tokens"`
			CacheCreate int64 `json:"cache_creation_input_tokens"`
			CacheRead   int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
		Models map[string]struct {
			Input       int64 `json:"inputTokens"`
			Output      int64 `json:"outputTokens"`
			CacheRead   int64 `json:"cacheReadInputTokens"`
			CacheCreate int64 `json:"cacheCreationInputTokens"`
		} `json:"modelUsage"`
	}
	if json.Unmarshal(line, &r) != nil || r.Type != "result" {
		return
	}
	total := m.last
	if len(r.Models) > 0 {
		total.InputTokens, total.OutputTokens, total.CacheTokens = 0, 0, 0
		for _, u := range r.Models {
			total.InputTokens += u.Input
			total.OutputTokens += u.Output
			total.CacheTokens += u.CacheRead + u.CacheCreate
		}
	} else if r.Usage != nil {
		total.InputTokens += r.Usage.Input
		total.OutputTokens += r.Usage.Output
		total.CacheTokens += r.Usage.CacheRead + r.Usage.CacheCreate
	}
	if r.Cost != nil {
		total.CostUSD = *r.Cost
	}
	m.advance(total)
}

// codexExec reads a turn.completed line, whose usage is the thread's
// running total. OpenAI's input tokens include the cached ones.
func (m *UsageMeter) codexExec(line []byte) {
	var r struct {
		Type  string `json:"type"`
		Usage *struct {
			Input  int64 `json:"input_tokens"`
			Cached int64 `json:"cached_input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(line, &r) != nil || r.Type != "turn.completed" || r.Usage == nil {
		return
	}
	total := m.last
	total.InputTokens = max(r.Usage.Input-r.Usage.Cached, 0)
	total.CacheTokens = r.Usage.Cached
	total.OutputTokens = r.Usage.Output
	m.advance(total)
}

// codexAppServer reads a thread/tokenUsage/updated notification: its
// "last" is the model call it reports, so the meter sums those (a resumed
// thread's "total" holds earlier runs' calls too).
func (m *UsageMeter) codexAppServer(line []byte) {
	var r struct {
		Method string `json:"method"`
		Params struct {
			TokenUsage struct {
				Last *struct {
					Input      int64 `json:"inputTokens"`
					Cached     int64 `json:"cachedInputTokens"`
					CacheWrite int64 `json:"cacheWriteInputTokens"`
					Output     int64 `json:"outputTokens"`
				} `json:"last"`
			} `json:"tokenUsage"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &r) != nil || r.Method != "thread/tokenUsage/updated" || r.Params.TokenUsage.Last == nil {
		return
	}
	l := r.Params.TokenUsage.Last
	if l.Input < 0 || l.Cached < 0 || l.CacheWrite < 0 || l.Output < 0 {
		return
	}
	m.sum.Add(protocol.AgentUsage{InputTokens: max(l.Input-l.Cached, 0), CacheTokens: l.Cached + l.CacheWrite, OutputTokens: l.Output})
}

// advance adds what the running total grew by since the last; a total
// any figure of which fell belongs to a new process, and counts whole.
func (m *UsageMeter) advance(total protocol.AgentUsage) {
	total.InputTokens, total.OutputTokens, total.CacheTokens = max(total.InputTokens, 0), max(total.OutputTokens, 0), max(total.CacheTokens, 0)
	total.CostUSD = max(total.CostUSD, 0)
	last := m.last
	if total.InputTokens < last.InputTokens || total.OutputTokens < last.OutputTokens || total.CacheTokens < last.CacheTokens || total.CostUSD < last.CostUSD {
		last = protocol.AgentUsage{}
	}
	m.sum.Add(protocol.AgentUsage{InputTokens: total.InputTokens - last.InputTokens, OutputTokens: total.OutputTokens - last.OutputTokens,
		CacheTokens: total.CacheTokens - last.CacheTokens, CostUSD: total.CostUSD - last.CostUSD})
	m.last = total
}
