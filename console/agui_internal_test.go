package console

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// policyChain is agui's claude-policy fixture as a watch delivers it.
func policyChain(t *testing.T) []client.Event {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "agui", "testdata", "claude-policy.chain.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []client.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Seq     uint64            `json:"seq"`
			Kind    string            `json:"kind"`
			Headers map[string]string `json:"headers"`
			Data    string            `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		ev := client.Event{Kind: protocol.RunKind(l.Kind), Seq: l.Seq, Data: []byte(l.Data)}
		h := l.Headers
		if ev.Kind == protocol.KindInput {
			ev.InputKind = h[protocol.HeaderInputKind]
			ev.EOF = h[protocol.HeaderInputEOF] == "true"
			ev.InputSeq, _ = strconv.ParseUint(h[protocol.HeaderInputSeq], 10, 64)
		}
		ev.Approval, ev.Verdict, ev.Rule, ev.DecidedBy = h[protocol.HeaderApproval], h[protocol.HeaderVerdict], h[protocol.HeaderRule], h[protocol.HeaderDecidedBy]
		evs = append(evs, ev)
	}
	return evs
}

// TestAGUIAnswerStart: the response to a resume starts at the AG-UI run
// that the answer to its approvals opens (a person's decision, or after
// a hold the follow-up turn; the timeout's hold is no answer) and ends
// with that turn.
func TestAGUIAnswerStart(t *testing.T) {
	evs := policyChain(t)
	for _, tc := range []struct {
		ids         []string
		first, last string
	}{
		{[]string{"9b2e4d71-5c3a-4f08-8d6e-1f7a2c9b3d22"}, "r/10:0", "r/15:1"},
		{[]string{"e58b9f13-7e2a-4c40-b6f8-3c9a0e1d2f44"}, "r/31:0", "r/35:1"},
		{[]string{"9b2e4d71-5c3a-4f08-8d6e-1f7a2c9b3d22", "e58b9f13-7e2a-4c40-b6f8-3c9a0e1d2f44"}, "r/31:0", "r/35:1"},
	} {
		rec := httptest.NewRecorder()
		s, _ := newSSE(rec)
		approvals := map[string]bool{}
		for _, id := range tc.ids {
			approvals[id] = true
		}
		w := &aguiWriter{sse: s, st: aguiStream{runID: "run-claude-policy", oneTurn: true, idPrefix: "r/", approvals: approvals}, userMessages: map[string]bool{}}
		p := agui.New("run-claude-policy", agui.WithDialect(agui.DialectClaude), agui.WithThreadID("session-9"))
		var err error
		for _, ev := range evs {
			if err = w.write(ev, p.Project(client.AGUIMessage(ev))); err != nil {
				break
			}
		}
		if !errors.Is(err, errTurnDone) {
			t.Fatalf("%v: the response did not end with its turn: %v", tc.ids, err)
		}
		var ids []string
		var types []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e agui.Event
				_ = json.Unmarshal([]byte(data), &e)
				types = append(types, string(e.Type))
			}
		}
		if len(ids) < 3 || ids[0] != tc.first || ids[len(ids)-1] != tc.last || types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" {
			t.Fatalf("%v: the response is %v %v, want %s .. %s", tc.ids, ids, types, tc.first, tc.last)
		}
	}
}
