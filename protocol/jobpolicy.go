package protocol

import (
	"strings"
	"unicode/utf8"

	"github.com/batonhq/baton/policy"
)

// MaxPolicyRules bounds a job policy's rules, all lists together.
const MaxPolicyRules = 64

const policyWant = `an object like {"default": "deny", "allow": ["Read"], "deny": ["Bash(curl *)"]}`

// readPolicy reads a job's policy, in either encoding.
func readPolicy(r fieldReader, key string, j *Job) error {
	p := &policy.Policy{}
	present, err := r.object(key, policyWant, []string{"default", "allow", "ask", "deny"}, func(k string) (err error) {
		switch k {
		case "default":
			var v string
			v, err = r.str(key + ".default")
			p.Default = policy.Verdict(v)
		case "allow":
			p.Allow, err = r.strList(key + ".allow")
		case "ask":
			p.Ask, err = r.strList(key + ".ask")
		case "deny":
			p.Deny, err = r.strList(key + ".deny")
		}
		return err
	})
	if present && err == nil {
		j.Policy = p
	}
	return err
}

// validatePolicy says what is wrong with a job's policy: too many rules, or
// a rule (or default) package policy refuses, the first of them.
func validatePolicy(p *policy.Policy) error {
	if p == nil {
		return nil
	}
	if n := len(p.Allow) + len(p.Ask) + len(p.Deny); n > MaxPolicyRules {
		return jobErr(ErrOversize, "field \"policy\" has %d rules, limit %d", n, MaxPolicyRules)
	}
	if err := p.Validate(); err != nil {
		// The first problem, cut to what a header carries (a rule may be
		// 1 KiB).
		first, _, _ := strings.Cut(err.Error(), "\n")
		first = strings.TrimPrefix(first, policy.ErrBadRule.Error()+": ")
		if len(first) > 200 {
			cut := 200
			for cut > 0 && !utf8.RuneStart(first[cut]) {
				cut--
			}
			first = first[:cut] + "…"
		}
		return jobErr(ErrInvalidJob, "policy: %s", first)
	}
	return nil
}

// normalizePolicy drops a policy that says nothing, so a job compares
// equal to its re-encoding.
func normalizePolicy(j *Job) {
	p := j.Policy
	if p == nil {
		return
	}
	for _, l := range []*[]string{&p.Allow, &p.Ask, &p.Deny} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if p.Default == "" && p.Allow == nil && p.Ask == nil && p.Deny == nil {
		j.Policy = nil
	}
}
