package worker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// TestTally counts a journal holding every kind of line: the agent's
// (JSON, not JSON, a forged sentinel, a Claude result), and the runner's
// input, egress and tool records, which are not the agent's output; the
// count stops at the sentinel, or at the position reached.
func TestTally(t *testing.T) {
	nonce := journal.NewNonce()
	var j bytes.Buffer
	agent := func(s string) { j.WriteString(s + "\n") }
	agent(`{"type":"system","subtype":"init"}`)
	agent(`progress: 42%`)
	j.Write(journal.InputRecord{Seq: 1, Nonce: nonce, Data: []byte("hi\n")}.Line())
	agent(`{"__exit":0,"__nonce":"forged"}`)
	j.Write(journal.EgressRecord{Nonce: nonce, Egress: journal.Egress{Host: "api.example.com", Port: 443, Allowed: true, BytesOut: 1000, BytesIn: 50000}}.Line())
	j.Write(journal.EgressRecord{Nonce: nonce, Egress: journal.Egress{Host: "evil.example", Port: 443, Reason: "not allowed"}}.Line())
	j.Write(journal.ToolRecord{Call: 1, Nonce: nonce, Phase: journal.ToolCall, Name: "deploy", Args: []byte(`{}`)}.Line())
	j.Write(journal.InputRecord{Seq: 2, Nonce: nonce, Data: []byte("bye\n"), EOF: true}.Line())
	agent(`{"type":"result","total_cost_usd":0.25,"modelUsage":{"m":{"inputTokens":10,"outputTokens":20,"cacheReadInputTokens":30,"cacheCreationInputTokens":5}}}`)
	agentBytes := int64(len(`{"type":"system","subtype":"init"}`+`progress: 42%`+`{"__exit":0,"__nonce":"forged"}`+
		`{"type":"result","total_cost_usd":0.25,"modelUsage":{"m":{"inputTokens":10,"outputTokens":20,"cacheReadInputTokens":30,"cacheCreationInputTokens":5}}}`) + 4)
	end := int64(j.Len())
	j.Write(journal.Sentinel{Nonce: nonce, Reason: journal.ReasonExit}.Line())
	agent(`{"type":"result","total_cost_usd":9}`) // after the sentinel: never the agent's

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, journal.JournalName), j.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &run{dir: journal.Dir(dir), nonce: nonce, offset: end, rec: kv.RunRecord{Events: "claude"}, log: zerolog.Nop()}
	var u protocol.Usage
	if err := r.tally(&u); err != nil {
		t.Fatal(err)
	}
	want := protocol.Usage{StdoutBytes: agentBytes, Lines: 4, Inputs: 2, EgressBytes: 51000,
		Agent: protocol.AgentUsage{InputTokens: 10, OutputTokens: 20, CacheTokens: 35, CostUSD: 0.25}}
	if u != want {
		t.Errorf("tally %+v\nwant  %+v", u, want)
	}
	// A run followed only so far (its runner died) counts what was reached.
	r.offset = int64(len(`{"type":"system","subtype":"init"}`) + 1)
	u = protocol.Usage{}
	if err := r.tally(&u); err != nil || u.Lines != 1 || u.StdoutBytes != r.offset || u.Inputs != 0 {
		t.Errorf("tally to %d: %+v, %v", r.offset, u, err)
	}
}
