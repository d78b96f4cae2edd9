package publisher_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// A tool record goes on the chain as a tool message: JSON without the
// nonce, its offset and call number in headers; an answer too long for the
// max payload is cut and marked truncated.
func TestPublishTool(t *testing.T) {
	b := r1(t)
	const run = "tools-1"
	c := publisher.NewChain(b.js, names, run, 0, publisher.WithMaxPayload(200))
	ctx := ctxT(t)
	nonce := "0123456789abcdef0123456789abcdef"
	for i, rec := range []journal.ToolRecord{
		{Call: 1, Nonce: nonce, Phase: journal.ToolCall, Name: "deploy", Args: []byte(`{"env":"prod"}`)},
		{Call: 1, Nonce: nonce, Phase: journal.ToolResult, Name: "deploy", Result: []byte(strings.Repeat("\x01", 150))},
		{Call: 2, Nonce: nonce, Phase: journal.ToolResult, Name: "deploy", Error: "no answer within 30s (toolLimits.timeout)"},
		{Call: 3, Nonce: nonce, Phase: journal.ToolCall, Name: "deploy", Args: []byte(`{"pad":"` + strings.Repeat("a", 300) + `"}`)},
		{Call: 3, Nonce: nonce, Phase: journal.ToolResult, Name: "deploy", Error: strings.Repeat("e", 400)},
	} {
		if err := c.PublishTool(ctx, rec, int64(100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	ms := chain(t, b, run)
	if len(ms) != 5 {
		t.Fatalf("%d messages", len(ms))
	}
	var got []protocol.ToolMessage
	for i, m := range ms {
		if m.subject != "baton.runs."+run+".tool" || strings.Contains(string(m.data), nonce) || len(m.data) > 200 ||
			m.get(protocol.HeaderOffset) != []string{"100", "200", "300", "400", "500"}[i] || m.get(protocol.HeaderMsgID) != lineID(run, int64(100*(i+1))) {
			t.Errorf("message %d: %s %q %v", i, m.subject, m.data, m.header)
		}
		var tm protocol.ToolMessage
		if err := json.Unmarshal(m.data, &tm); err != nil {
			t.Fatal(err)
		}
		got = append(got, tm)
	}
	if string(got[0].Args) != `{"env":"prod"}` || got[0].Phase != "call" || ms[0].get(protocol.HeaderToolCall) != "1" {
		t.Errorf("call %+v", got[0])
	}
	if r := got[1].Result; r == nil || !got[1].Truncated || len(*r) == 0 || len(*r) >= 150 || strings.Trim(*r, "\x01") != "" {
		t.Errorf("long answer %+v", got[1])
	}
	if got[2].Error == "" || got[2].Result != nil || got[2].Truncated || ms[2].get(protocol.HeaderToolCall) != "2" {
		t.Errorf("error answer %+v", got[2])
	}
	if got[3].Args != nil || !got[3].Truncated || got[4].Error == "" || len(got[4].Error) >= 400 || !got[4].Truncated {
		t.Errorf("oversize call %+v, error %+v: want cut and marked truncated", got[3], got[4])
	}
}
