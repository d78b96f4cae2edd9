package agui_test

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/protocol"
)

// eventsLines reads the whole events lines of a recorded chain in
// testdata: what the agent printed, as a worker's journal holds it.
func eventsLines(t testing.TB, name string) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/" + name + ".chain.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			Kind    string            `json:"kind"`
			Headers map[string]string `json:"headers"`
			Data    string            `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind == "events" && m.Headers[protocol.HeaderChunk] == "" {
			lines = append(lines, []byte(m.Data))
		}
	}
	return lines
}

func TestUsageMeterRecorded(t *testing.T) {
	for _, tc := range []struct {
		chain   string
		dialect agui.Dialect
		want    protocol.AgentUsage
	}{
		// Four turns of one process: modelUsage and total_cost_usd run on
		// (80 in, 160 out, $0.0044 at its last result).
		{"claude-chat", agui.DialectClaude, protocol.AgentUsage{InputTokens: 80, OutputTokens: 160, CostUSD: 0.0044}},
		{"claude-chat", "", protocol.AgentUsage{InputTokens: 80, OutputTokens: 160, CostUSD: 0.0044}},
		// 20 input of which 8 cached.
		{"codex-exec", agui.DialectCodexExec, protocol.AgentUsage{InputTokens: 12, CacheTokens: 8, OutputTokens: 10}},
		{"codex-exec-tools", "", protocol.AgentUsage{InputTokens: 400, CacheTokens: 800, OutputTokens: 300}},
		// Four calls of 10 in (4 cached) and 5 out.
		{"codex-app-server", agui.DialectCodexAppServer, protocol.AgentUsage{InputTokens: 24, CacheTokens: 16, OutputTokens: 20}},
		{"codex-app-server", "", protocol.AgentUsage{InputTokens: 24, CacheTokens: 16, OutputTokens: 20}},
		// The fake agent's result line, as Claude Code's.
		{"fakeagent-story", "", protocol.AgentUsage{InputTokens: 39, OutputTokens: 310, CacheTokens: 107750, CostUSD: 0.051755}},
		{"raw-generic", "", protocol.AgentUsage{}},
	} {
		t.Run(tc.chain+"/"+string(tc.dialect), func(t *testing.T) {
			m := agui.NewUsageMeter(tc.dialect)
			for _, l := range eventsLines(t, tc.chain) {
				m.Observe(l)
			}
			got := m.Usage()
			if math.Abs(got.CostUSD-tc.want.CostUSD) > 1e-9 {
				t.Errorf("cost %v, want %v", got.CostUSD, tc.want.CostUSD)
			}
			got.CostUSD = tc.want.CostUSD
			if got != tc.want {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUsageMeterLines(t *testing.T) {
	const (
		// Claude result lines as Claude Code prints them, cut to what
		// counts.
		claude1 = `{"type":"result","subtype":"success","total_cost_usd":0.5,"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":20},"modelUsage":{"claude-opus-4-8":{"inputTokens":10,"outputTokens":20,"cacheReadInputTokens":1000,"cacheCreationInputTokens":100,"costUSD":0.45},"claude-haiku-4-5":{"inputTokens":5,"outputTokens":1,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.05}}}`
		claude2 = `{"type":"result","subtype":"success","total_cost_usd":0.75,"usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2},"modelUsage":{"claude-opus-4-8":{"inputTokens":14,"outputTokens":22,"cacheReadInputTokens":1000,"cacheCreationInputTokens":100,"costUSD":0.7},"claude-haiku-4-5":{"inputTokens":5,"outputTokens":1,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.05}}}`
		// Without modelUsage (older Claude Code): usage is the turn's.
		claudeBare = `{"type":"result","subtype":"success","usage":{"input_tokens":3,"cache_creation_input_tokens":1,"cache_read_input_tokens":2,"output_tokens":4}}`
		codex1     = `{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":8,"output_tokens":10,"reasoning_output_tokens":4}}`
		codex2     = `{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":18,"output_tokens":15}}`
	)
	for _, tc := range []struct {
		name    string
		dialect agui.Dialect
		lines   []string
		want    protocol.AgentUsage
	}{
		{"claude models and cost", agui.DialectClaude, []string{claude1}, protocol.AgentUsage{InputTokens: 15, OutputTokens: 21, CacheTokens: 1100, CostUSD: 0.5}},
		{"claude running totals", agui.DialectClaude, []string{claude1, claude2}, protocol.AgentUsage{InputTokens: 19, OutputTokens: 23, CacheTokens: 1100, CostUSD: 0.75}},
		// A second process starts its totals again: they count whole.
		{"claude new process", agui.DialectClaude, []string{claude2, claude1}, protocol.AgentUsage{InputTokens: 19 + 15, OutputTokens: 23 + 21, CacheTokens: 2200, CostUSD: 1.25}},
		{"claude bare turns", "", []string{claudeBare, claudeBare}, protocol.AgentUsage{InputTokens: 6, OutputTokens: 8, CacheTokens: 6}},
		{"claude assistant line", agui.DialectClaude, []string{`{"type":"assistant","message":{"usage":{"input_tokens":99}}}`}, protocol.AgentUsage{}},
		{"claude result in text", agui.DialectClaude, []string{`{"type":"assistant","text":"\"result\""}`}, protocol.AgentUsage{}},
		{"codex exec totals", agui.DialectCodexExec, []string{codex1, codex2}, protocol.AgentUsage{InputTokens: 32, CacheTokens: 18, OutputTokens: 15}},
		{"codex exec sniffed", "", []string{`{"type":"thread.started","thread_id":"t"}`, codex1}, protocol.AgentUsage{InputTokens: 12, CacheTokens: 8, OutputTokens: 10}},
		{"codex app-server", agui.DialectCodexAppServer, []string{
			`{"method":"thread/tokenUsage/updated","params":{"threadId":"t","turnId":"u","tokenUsage":{"total":{"inputTokens":500,"cachedInputTokens":0,"outputTokens":500},"last":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":4,"cacheWriteInputTokens":1,"outputTokens":5}}}}`,
		}, protocol.AgentUsage{InputTokens: 6, CacheTokens: 5, OutputTokens: 5}},
		{"negative figures", agui.DialectCodexAppServer, []string{
			`{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":-10,"outputTokens":5}}}}`,
		}, protocol.AgentUsage{}},
		{"raw counts nothing", agui.DialectRaw, []string{claude1, codex1}, protocol.AgentUsage{}},
		{"garbage", "", []string{`{"type":"result"`, `not json "result"`, ``}, protocol.AgentUsage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := agui.NewUsageMeter(tc.dialect)
			for _, l := range tc.lines {
				m.Observe([]byte(l))
			}
			got := m.Usage()
			if math.Abs(got.CostUSD-tc.want.CostUSD) > 1e-9 {
				t.Errorf("cost %v, want %v", got.CostUSD, tc.want.CostUSD)
			}
			got.CostUSD = tc.want.CostUSD
			if got != tc.want {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzUsageMeter: no line makes a meter panic or report a negative
// figure, whatever the dialect.
func FuzzUsageMeter(f *testing.F) {
	for _, name := range []string{"claude-chat", "codex-exec-tools", "codex-app-server"} {
		for _, l := range eventsLines(f, name) {
			f.Add(byte(0), l)
		}
	}
	f.Add(byte(1), []byte(`{"type":"result","total_cost_usd":-1,"modelUsage":{"m":{"inputTokens":-5}}}`))
	dialects := append([]agui.Dialect{""}, agui.Dialects...)
	f.Fuzz(func(t *testing.T, d byte, line []byte) {
		m := agui.NewUsageMeter(dialects[int(d)%len(dialects)])
		m.Observe(line)
		m.Observe(line)
		u := m.Usage()
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheTokens < 0 || u.CostUSD < 0 || math.IsNaN(u.CostUSD) {
			t.Fatalf("usage %+v from %q", u, line)
		}
	})
}
