package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"time"
)

// MCPClient is the MCP client mode: it starts server (argv: `baton mcp`
// in a sandbox), initializes, lists the tools, then makes calls calls of
// tool, one after the other, each with arguments {"n":i}. It prints each
// answer as a JSON line {"type":"mcp_call","n","ms","isError","text"},
// and last {"type":"mcp_bench","calls","p50_ms","p99_ms","max_ms"}: the
// round trips as the agent sees them.
func MCPClient(ctx context.Context, stdout io.Writer, server []string, tool string, calls int) error {
	if len(server) == 0 || tool == "" || calls < 1 {
		return errors.New("fakeagent: the MCP client needs a server, a tool and at least one call")
	}
	cmd := exec.CommandContext(ctx, server[0], server[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("fakeagent: start the MCP server: %w", err)
	}
	defer func() { _ = cmd.Wait() }()
	defer in.Close()
	out := bufio.NewScanner(outPipe)
	out.Buffer(make([]byte, 0, 64<<10), 4<<20)
	id := 0
	ask := func(method string, params any) (map[string]any, error) {
		id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := in.Write(append(b, '\n')); err != nil {
			return nil, err
		}
		if !out.Scan() {
			return nil, fmt.Errorf("fakeagent: the MCP server ended: %v", out.Err())
		}
		var a map[string]any
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			return nil, err
		}
		if e, ok := a["error"]; ok {
			return nil, fmt.Errorf("fakeagent: %s: %v", method, e)
		}
		return a, nil
	}
	// Each line in one write, as it happens: the journal places it after
	// the answer it is about.
	w := stdout
	if _, err := ask("initialize", map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "baton-fake-agent", "version": "1"}}); err != nil {
		return err
	}
	list, err := ask("tools/list", map[string]any{})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"type": "mcp_tools", "tools": list["result"]})
	fmt.Fprintf(w, "%s\n", b)
	took := make([]time.Duration, 0, calls)
	for i := range calls {
		began := time.Now()
		a, err := ask("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"n": i}})
		if err != nil {
			return err
		}
		d := time.Since(began)
		took = append(took, d)
		r, _ := a["result"].(map[string]any)
		text := ""
		if c, ok := r["content"].([]any); ok && len(c) > 0 {
			text, _ = c[0].(map[string]any)["text"].(string)
		}
		b, _ := json.Marshal(map[string]any{"type": "mcp_call", "n": i, "ms": ms(d), "isError": r["isError"], "text": text})
		fmt.Fprintf(w, "%s\n", b)
	}
	slices.Sort(took)
	b, _ = json.Marshal(map[string]any{"type": "mcp_bench", "calls": calls, "p50_ms": ms(took[len(took)/2]),
		"p99_ms": ms(took[len(took)*99/100]), "max_ms": ms(took[len(took)-1])})
	fmt.Fprintf(w, "%s\n", b)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
