package protocol

// KindEgress is the chain's egress messages: one per connection the
// run's egress proxy decided (allowed and ended, or refused), as JSON
// (docs/protocol.md), in order with the agent's lines.
const KindEgress RunKind = "egress"

// EgressSubject carries runID's egress messages.
func (n Names) EgressSubject(runID string) string { return n.prefix + ".runs." + runID + ".egress" }
