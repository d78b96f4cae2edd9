package main

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/batonhq/baton/policy"
)

// prompts holds the permission prompts of a run that no input has answered
// yet, oldest first: attach answers the oldest with a y or an n.
type prompts struct {
	mu      sync.Mutex
	pending []policy.Request
}

func (p *prompts) add(a policy.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, a)
}

// resolve drops the prompt an answer with id settles.
func (p *prompts) resolve(id json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range p.pending {
		if string(a.ID) == string(id) {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return
		}
	}
}

// oldest is the prompt a y or an n answers.
func (p *prompts) oldest() (policy.Request, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		return policy.Request{}, false
	}
	return p.pending[0], true
}

// reply is the input line attach sends for a typed line: the answer to the
// oldest prompt for "y"/"yes"/"allow" and "n"/"no"/"deny [why]" while one
// waits, else nil (the line goes as it is).
func (p *prompts) reply(typed string) []byte {
	a, ok := p.oldest()
	if !ok {
		return nil
	}
	word, why, _ := strings.Cut(strings.TrimSpace(typed), " ")
	switch strings.ToLower(word) {
	case "y", "yes", "allow":
		return a.Answer(true, "")
	case "n", "no", "deny":
		if why = strings.TrimSpace(why); why == "" {
			why = "denied by the user"
		}
		return a.Answer(false, why)
	}
	return nil
}

// idText is a request id for a person: a string without its quotes.
func idText(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return sanitize([]byte(s), false)
	}
	return sanitize(id, false)
}
