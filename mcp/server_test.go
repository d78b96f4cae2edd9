package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/mcp"
)

// fakeBackend lists deploy and answers calls by echoing their arguments.
type fakeBackend struct{}

func (fakeBackend) List(context.Context) ([]mcp.Tool, error) {
	return []mcp.Tool{{Name: "deploy", Description: "Deploy", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}

func (fakeBackend) Call(_ context.Context, name string, args json.RawMessage) (string, error) {
	switch name {
	case "deploy":
		return "deployed " + string(args), nil
	case "broken":
		return "", errors.New("the service answered 500: down")
	}
	return "", fmt.Errorf("%w: %s is not one of this run's tools", mcp.ErrUnknownTool, name)
}

// serve runs a server over in and returns what it wrote, one string a
// line.
func serve(t *testing.T, in string, opts ...mcp.Option) []string {
	t.Helper()
	var out bytes.Buffer
	if err := mcp.NewServer(fakeBackend{}, opts...).Serve(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	s := strings.TrimSuffix(out.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestServer(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"claude-code","version":"2"}}}`,
			[]string{`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2024-11-05","serverInfo":{"name":"baton","version":"dev"}}}`}},
		{"initialized notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil},
		{"ping", `{"jsonrpc":"2.0","id":"a","method":"ping"}`, []string{`{"jsonrpc":"2.0","id":"a","result":{}}`}},
		{"list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			[]string{`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"deploy","description":"Deploy","inputSchema":{"type":"object"}}]}}`}},
		{"call", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"}}}`,
			[]string{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"deployed {\"env\":\"prod\"}"}],"isError":false}}`}},
		{"call without arguments", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"deploy"}}`,
			[]string{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"deployed {}"}],"isError":false}}`}},
		{"tool error", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"broken","arguments":{}}}`,
			[]string{`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"the service answered 500: down"}],"isError":true}}`}},
		{"unknown tool", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`,
			[]string{`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown tool: rm_rf is not one of this run's tools"}}`}},
		{"call without params", `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`,
			[]string{`{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"tools/call needs params {name, arguments}"}}`}},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"resources/list"}`,
			[]string{`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found: resources/list"}}`}},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, nil},
		{"not JSON", `{"jsonrpc":`, []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"not JSON: unexpected end of JSON input"}}`}},
		{"wrong version", `{"jsonrpc":"1.0","id":8,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"jsonrpc must be \"2.0\""}}`}},
		{"no method", `{"jsonrpc":"2.0","id":9}`, []string{`{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"no method"}}`}},
		{"method not a string", `{"jsonrpc":"2.0","id":10,"method":5}`,
			[]string{`{"jsonrpc":"2.0","id":10,"error":{"code":-32600,"message":"json: cannot unmarshal number into Go struct field request.method of type string"}}`}},
		{"bad id", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, nil}, // an object id is no id: a notification
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches are not supported"}}`}},
		{"blank lines", "\n  \n", nil},
		{"last line without newline", `{"jsonrpc":"2.0","id":11,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":11,"result":{}}`}},
		{"oversized then good", `{"jsonrpc":"2.0","id":12,"method":"ping","pad":"` + strings.Repeat("x", 200) + `"}` + "\n" + `{"jsonrpc":"2.0","id":13,"method":"ping"}`,
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"message longer than 200 bytes"}}`, `{"jsonrpc":"2.0","id":13,"result":{}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serve(t, tc.in, mcp.WithMaxLine(200))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// An oversized line longer than the reader's buffer is skipped whole.
func TestServerSkipsHugeLine(t *testing.T) {
	in := strings.Repeat("y", 300<<10) + "\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	got := serve(t, in, mcp.WithMaxLine(1<<10))
	if len(got) != 2 || !strings.Contains(got[0], "-32700") || got[1] != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("got %q", got)
	}
}

func FuzzServer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"a":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/list"}`))
	f.Add([]byte("[1,2]\n{}\n\x00\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := mcp.NewServer(fakeBackend{}, mcp.WithMaxLine(256)).Serve(context.Background(), bytes.NewReader(in), &out); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		// Every answer is one JSON-RPC 2.0 response: a result or an error.
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				JSONRPC string              `json:"jsonrpc"`
				ID      json.RawMessage     `json:"id"`
				Result  json.RawMessage     `json:"result"`
				Error   *struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.JSONRPC != "2.0" || r.ID == nil || (r.Result == nil) == (r.Error == nil) {
				t.Fatalf("answer %q to %q", line, in)
			}
		}
	})
}
