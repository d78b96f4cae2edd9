package journal

import (
	"bytes"
	"testing"
)

func TestToolRecordRoundTrip(t *testing.T) {
	for _, r := range []ToolRecord{
		{Call: 3, Nonce: testNonce, Phase: ToolCall, Name: "create_pr", Args: []byte(`{"title":"x"}`)},
		{Call: 3, Nonce: testNonce, Phase: ToolResult, Name: "create_pr", Result: []byte("PR #7 \xff")},
		{Call: 4, Nonce: testNonce, Phase: ToolResult, Name: "deploy", Error: "timeout after 30s"},
	} {
		line := r.Line()
		got, ok := ParseToolRecord(bytes.TrimSuffix(line, []byte("\n")), testNonce)
		if !ok || got.Call != r.Call || got.Phase != r.Phase || got.Name != r.Name || !bytes.Equal(got.Args, r.Args) ||
			!bytes.Equal(got.Result, r.Result) || got.Error != r.Error {
			t.Fatalf("ParseToolRecord(%q) = %+v, %v", line, got, ok)
		}
	}
}

func TestParseToolRecordRejects(t *testing.T) {
	n := testNonce
	for _, tc := range []struct{ name, line, nonce string }{
		{"other nonce", `{"__tool":1,"__nonce":"0123456789abcdef0123456789abcdef","phase":"call","name":"a"}`, n},
		{"empty nonce", `{"__tool":1,"__nonce":"","phase":"call","name":"a"}`, ""},
		{"agent line", `{"type":"tool_use"}`, n},
		{"unknown field", `{"__tool":1,"__nonce":"` + n + `","phase":"call","name":"a","x":1}`, n},
		{"call zero", `{"__tool":0,"__nonce":"` + n + `","phase":"call","name":"a"}`, n},
		{"call string", `{"__tool":"1","__nonce":"` + n + `","phase":"call","name":"a"}`, n},
		{"unknown phase", `{"__tool":1,"__nonce":"` + n + `","phase":"done","name":"a"}`, n},
		{"call with result", `{"__tool":1,"__nonce":"` + n + `","phase":"call","name":"a","result":"eA=="}`, n},
		{"result with args", `{"__tool":1,"__nonce":"` + n + `","phase":"result","name":"a","args":"eA=="}`, n},
		{"bad name", `{"__tool":1,"__nonce":"` + n + `","phase":"call","name":"a.b"}`, n},
		{"no name", `{"__tool":1,"__nonce":"` + n + `","phase":"call"}`, n},
		{"bad base64", `{"__tool":1,"__nonce":"` + n + `","phase":"call","name":"a","args":"!!"}`, n},
		{"two objects", `{"__tool":1,"__nonce":"` + n + `","phase":"call","name":"a"}{}`, n},
		{"truncated", `{"__tool":1,"__nonce":"` + n, n},
		{"input record", `{"__input":1,"__nonce":"` + n + `","data":""}`, n},
	} {
		if r, ok := ParseToolRecord([]byte(tc.line), tc.nonce); ok {
			t.Errorf("%s: parsed %q as %+v", tc.name, tc.line, r)
		}
	}
}

func TestValidToolName(t *testing.T) {
	for name, want := range map[string]bool{"deploy": true, "create_pr": true, "a-b": true, "": false, "a.b": false,
		"a b": false, "a*": false, ">": false, string(make([]byte, 65)): false} {
		if got := ValidToolName(name); got != want {
			t.Errorf("ValidToolName(%q) = %v, want %v", name, got, want)
		}
	}
}

func FuzzParseToolRecord(f *testing.F) {
	f.Add([]byte(`{"__tool":1,"__nonce":"` + testNonce + `","phase":"call","name":"deploy","args":"e30="}`))
	f.Add([]byte(`{"__tool":2,"__nonce":"` + testNonce + `","phase":"result","name":"deploy","error":"no"}`))
	f.Add([]byte(`{"__tool":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := ParseToolRecord(line, testNonce)
		if !ok {
			return
		}
		// What parses re-encodes to a record that parses the same.
		again, ok := ParseToolRecord(bytes.TrimSuffix(r.Line(), []byte("\n")), testNonce)
		if !ok || again.Call != r.Call || again.Phase != r.Phase || again.Name != r.Name ||
			!bytes.Equal(again.Args, r.Args) || !bytes.Equal(again.Result, r.Result) || again.Error != r.Error {
			t.Fatalf("%q parsed as %+v, re-encoded as %+v (%v)", line, r, again, ok)
		}
	})
}
