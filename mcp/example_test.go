package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"

	"github.com/batonhq/baton/mcp"
)

// greeter is a Backend of one tool.
type greeter struct{}

func (greeter) List(context.Context) ([]mcp.Tool, error) {
	return []mcp.Tool{{Name: "greet", Description: "Say hello", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}

func (greeter) Call(_ context.Context, _ string, args json.RawMessage) (string, error) {
	var a struct{ Name string }
	_ = json.Unmarshal(args, &a)
	return "hello " + a.Name, nil
}

// An MCP client's messages, one a line, and the server's answers. In a
// sandbox, `baton mcp` serves mcp.SocketBackend, which asks the runner.
func ExampleServer_Serve() {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ada"}}}
`)
	_ = mcp.NewServer(greeter{}).Serve(context.Background(), in, os.Stdout)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"greet","description":"Say hello","inputSchema":{"type":"object"}}]}}
	// {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hello ada"}],"isError":false}}
}
