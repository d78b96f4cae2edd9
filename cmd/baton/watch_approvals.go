package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// A run whose profile has a policy: baton itself decides each permission
// prompt, or asks a person. The prompt line carries its approval id, the
// policy's verdict and rule (client.Event.Approval, Verdict, Rule), and
// what baton writes to the agent is a decision input (or, after a hold, a
// follow-up turn) with who decided.

// policyPrompt shows a prompt line the run's policy saw: the tool and what
// it asks, the rule that matched and, when a person is asked, how to
// answer. It reports false for a line that is no prompt (shown as any).
func (p *eventPrinter) policyPrompt(ev client.Event) bool {
	line := trimEOL(ev.Data)
	p.reader.Observe(line)
	r, ok := p.reader.Request(line)
	if !ok {
		return false
	}
	if p.tools == nil {
		p.tools = map[string]string{}
	}
	p.tools[ev.Approval] = r.Tool
	what := toolSummary(r.Input)
	if r.Agent == policy.Codex && r.Target != "" { // the command, or the paths
		what = cut(sanitize([]byte(strings.ReplaceAll(r.Target, "\n", ", ")), false), 200)
	}
	rule := sanitize([]byte(cmp.Or(ev.Rule, ev.Verdict)), false)
	how := "  [" + rule + "]"
	if ev.Verdict == "ask" {
		if p.asks != nil {
			p.asks.add(ev.Approval)
			how += "  (y: allow, n [why]: deny)"
		} else {
			how += "  (baton approve " + cmp.Or(p.runID, "RUNID") + " " + sanitize([]byte(ev.Approval), false) + " [--deny])"
		}
	}
	p.line(p.paint(styleBold+styleYellow, "? "+sanitize([]byte(r.Tool), false)+" asks: ") + what + p.paint(styleDim, how))
	return true
}

// decision shows what baton wrote to the agent for an approval: the
// answer, a hold, or the follow-up turn after a hold.
func (p *eventPrinter) decision(ev client.Event) {
	id := sanitize([]byte(ev.Approval), false)
	tool := "request " + id
	if t, ok := p.tools[ev.Approval]; ok {
		tool = sanitize([]byte(t), false)
	}
	by := sanitize([]byte(cmp.Or(ev.DecidedBy, "?")), false)
	if p.asks != nil && ev.DecidedBy != protocol.DecidedByTimeout {
		p.asks.resolve(ev.Approval)
	}
	switch {
	case ev.InputKind == protocol.InputKindFollowUp:
		p.line(p.paint(styleGreen, "[followup] "+tool+" allowed by "+by+" after its hold: the agent is asked to retry it"))
	case ev.DecidedBy == protocol.DecidedByTimeout:
		p.line(p.paint(styleYellow, "[decision] hold "+tool+": nobody answered in time; the agent is told it awaits approval") +
			p.paint(styleDim, "  (baton approve "+cmp.Or(p.runID, "RUNID")+" "+id+" [--deny])"))
	default:
		_, allow, why, ok := policy.Answered(trimEOL(ev.Data))
		word, style := "deny", styleRed
		if allow {
			word, style = "allow", styleGreen
		}
		if !ok {
			word, style = "answer", styleBold
		}
		s := "[decision] " + word + " " + tool + " by " + by
		if ev.Rule != "" {
			s += " (" + sanitize([]byte(ev.Rule), false) + ")"
		}
		if ok && !allow && why != "" && why != "decline" { // Codex's has no message
			s += ": " + sanitize([]byte(why), false)
		}
		p.line(p.paint(style, s))
	}
	if ev.EOF {
		p.line(p.paint(styleDim, "you › end of input (the agent's stdin is closed)"))
	}
}

// asks holds the approvals of a run that attach shows waiting for a
// person, oldest first: a y or an n typed answers the oldest through
// 'baton approve'.
type asks struct {
	mu      sync.Mutex
	pending []string
}

func (q *asks) add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.pending {
		if p == id {
			return
		}
	}
	q.pending = append(q.pending, id)
}

func (q *asks) resolve(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, p := range q.pending {
		if p == id {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			return
		}
	}
}

func (q *asks) oldest() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return "", false
	}
	return q.pending[0], true
}

// answer approves the oldest approval waiting when typed is a y or an n
// ("n [why]"), and reports whether it took the line. What the worker
// answered goes to errOut; the decision itself shows on the chain.
func (q *asks) answer(ctx context.Context, c *client.Client, runID, typed string, errOut io.Writer) bool {
	id, ok := q.oldest()
	if !ok {
		return false
	}
	word, why, _ := strings.Cut(strings.TrimSpace(typed), " ")
	opts := []client.ApproveOption{client.WithDecidedBy(currentUser())}
	switch strings.ToLower(word) {
	case "y", "yes", "allow":
	case "n", "no", "deny":
		opts = append(opts, client.WithDeny(cmp.Or(strings.TrimSpace(why), "denied by the user")))
	default:
		return false
	}
	a, err := c.Approve(ctx, runID, id, opts...)
	if err != nil {
		q.resolve(id) // decided, or not to be: the next y answers the next one
		fmt.Fprintf(errOut, "baton: %v\n", approveError(runID, id, a, err))
	}
	return true
}
