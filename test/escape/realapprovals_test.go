package escape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/protocol"
)

// claudePolicyProfile is the example's claude-chat profile with a policy:
// what TestRealAgents' claude-policy case runs.
const claudePolicyProfile = "claude-policy"

// addClaudePolicy adds claudePolicyProfile to the worker config at cfg (a
// realProfiles file holding claude-chat): allow an echo into proof.txt,
// deny curl, ask for anything else, with the default askTimeout (45 s).
func addClaudePolicy(cfg string) error {
	b, err := os.ReadFile(cfg)
	if err != nil {
		return err
	}
	var c map[string]map[string]map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		return err
	}
	p := map[string]any{}
	for k, v := range c["profiles"]["claude-chat"] {
		p[k] = v
	}
	p["policy"] = map[string]any{"default": "ask", "allow": []string{"Bash(echo allowed >> proof.txt)"}, "deny": []string{"Bash(curl *)"}}
	c["profiles"][claudePolicyProfile] = p
	if b, err = yaml.Marshal(c); err != nil {
		return err
	}
	return os.WriteFile(cfg, b, 0o644)
}

// claudePolicy talks with the real Claude Code CLI, through the mock API,
// under claudePolicyProfile, on the worker at url: a command the policy
// allows runs, one it denies does not (Claude is told the rule), and one
// it asks about waits for a person past Claude's own patience (about 60
// s): baton holds it at askTimeout, and `baton approve` after 61 s sends
// the follow-up turn, whose retry runs. It returns what went wrong; it
// runs beside the other cases, which it must not stop.
func claudePolicy(api *mockAPI, bin, url, stateDir string) (problems []string) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		return []string{err.Error()}
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	names := protocol.MustNames("")
	c, err := client.New(js, names)
	if err != nil {
		return []string{err.Error()}
	}
	const runID = "real-claude-policy"
	job, _ := json.Marshal(map[string]any{"runId": runID, "profile": claudePolicyProfile,
		"input": string(client.StreamJSONUserMessage("run: echo allowed >> proof.txt")) + "\n"})
	if _, err := js.Publish(ctx, names.RunJobSubject(), job); err != nil {
		return []string{"submit: " + err.Error()}
	}
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.RunFilter(runID)}})
	if err != nil {
		return []string{err.Error()}
	}
	var msgs []jetstream.Msg
	// next returns the next chain message that ok accepts.
	next := func(what string, ok func(jetstream.Msg) bool) (jetstream.Msg, error) {
		for {
			m, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				return nil, fmt.Errorf("no %s on the chain: %w (seen %d messages)", what, err, len(msgs))
			}
			msgs = append(msgs, m)
			if ok(m) {
				return m, nil
			}
			if st, err := protocol.ParseStatus(m.Data()); err == nil && strings.HasSuffix(m.Subject(), ".status") && st.Status.Terminal() {
				var seen strings.Builder
				for _, m := range msgs {
					fmt.Fprintf(&seen, "%s %s %.300s\n", m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:], m.Headers().Get(protocol.HeaderRule), m.Data())
				}
				if bodies := api.requestBodies(); len(bodies) > 0 {
					var req struct{ Messages []json.RawMessage }
					if json.Unmarshal([]byte(bodies[len(bodies)-1]), &req) == nil {
						for _, m := range req.Messages[max(len(req.Messages)-3, 0):] {
							fmt.Fprintf(&seen, "the API's last request: %.600s\n", m)
						}
					}
				}
				return nil, fmt.Errorf("the run ended %s (%s) before a %s; its chain:\n%s", st.Status, st.Reason, what, seen.String())
			}
		}
	}
	result := func(m jetstream.Msg) bool {
		var ev struct{ Type string }
		return strings.HasSuffix(m.Subject(), ".events") && json.Unmarshal(m.Data(), &ev) == nil && ev.Type == "result"
	}
	say := func(text string) error {
		_, err := c.Send(ctx, runID, client.StreamJSONUserMessage(text))
		return err
	}
	if _, err := next("first turn's result", result); err != nil {
		return []string{err.Error()}
	}
	if err := say("run: curl https://example.com"); err != nil {
		return []string{err.Error()}
	}
	if _, err := next("second turn's result", result); err != nil {
		return []string{err.Error()}
	}
	if err := say("run: echo approved >> proof.txt"); err != nil {
		return []string{err.Error()}
	}
	ask, err := next("prompt asking a person", func(m jetstream.Msg) bool { return m.Headers().Get(protocol.HeaderVerdict) == "ask" })
	if err != nil {
		return []string{err.Error()}
	}
	asked, id := time.Now(), ask.Headers().Get(protocol.HeaderApproval)
	if _, err := next("hold's turn end", result); err != nil {
		return []string{err.Error()}
	}
	// A person answers after Claude's own wait would have run out.
	select {
	case <-time.After(time.Until(asked.Add(61 * time.Second))):
	case <-ctx.Done():
		return []string{"no time left to approve"}
	}
	if out, err := bounded.Command(ctx, bin, "approve", "--nats", url, "--by", "ana", runID, id).CombinedOutput(); err != nil {
		return []string{fmt.Sprintf("baton approve %s %s: %v\n%s", runID, id, err, out)}
	}
	if _, err := next("retried turn's result", result); err != nil {
		return []string{err.Error()}
	}
	if _, err := c.Send(ctx, runID, nil, client.WithEOF()); err != nil {
		return []string{err.Error()}
	}
	if _, err := next("terminal status", func(m jetstream.Msg) bool {
		st, err := protocol.ParseStatus(m.Data())
		return strings.HasSuffix(m.Subject(), ".status") && err == nil && st.Status.Terminal()
	}); err != nil && !strings.Contains(err.Error(), "the run ended") {
		return []string{err.Error()}
	}
	// Each prompt's verdict on its line, and baton's inputs for it.
	var got []string
	for _, m := range msgs {
		h := m.Headers()
		switch {
		case strings.HasSuffix(m.Subject(), ".events") && h.Get(protocol.HeaderApproval) != "":
			got = append(got, "prompt "+h.Get(protocol.HeaderRule))
		case strings.HasSuffix(m.Subject(), ".input") && h.Get(protocol.HeaderApproval) != "":
			got = append(got, h.Get(protocol.HeaderInputKind)+" by "+h.Get(protocol.HeaderDecidedBy))
		}
	}
	want := []string{"prompt allow: Bash(echo allowed >> proof.txt)", "decision by policy",
		"prompt deny: Bash(curl *)", "decision by policy",
		"prompt default: ask", "decision by timeout", "followup by ana",
		"prompt approved: " + id, "decision by ana"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		fail("the chain's prompts and baton's answers: %q, want %q", got, want)
	}
	results := strings.Join(api.toolResults(), "\n")
	for _, w := range []string{"Denied by baton's policy (deny: Bash(curl *))", "awaits a person's approval"} {
		if !strings.Contains(results, w) {
			fail("Claude sent the API no tool result saying %q: %q", w, api.toolResults())
		}
	}
	proof, err := os.ReadFile(filepath.Join(stateDir, "runs", runID, "workspace", "proof.txt"))
	if errors.Is(err, os.ErrNotExist) {
		// A root worker gives a finished run's workspace back: read the
		// capture.
		out := filepath.Join(os.TempDir(), "baton-claude-policy-outputs")
		defer os.RemoveAll(out)
		if b, err := bounded.Command(ctx, bin, "outputs", "--nats", url, runID, "--get", "all", "-o", out).CombinedOutput(); err != nil {
			fail("baton outputs: %v\n%s", err, b)
		}
		proof, err = os.ReadFile(filepath.Join(out, "files", "proof.txt"))
	}
	if string(proof) != "allowed\napproved\n" {
		fail("proof.txt = %q, %v: want the allowed command's line, then the approved one's", proof, err)
	}
	return problems
}
