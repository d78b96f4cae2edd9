package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Verdict is what a policy says of a request.
type Verdict string

// Verdicts, from the least strict.
const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

// strictness orders verdicts; an unknown one counts as Deny, so that a
// verdict nobody validated never lets anything through.
func (v Verdict) strictness() int {
	switch v {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// ErrBadRule is wrapped by every error of Validate.
var ErrBadRule = errors.New("bad policy rule")

// Policy decides a request by its rules: a rule is a tool name (`Read`,
// `mcp__github__create_issue`), which matches every request of that tool,
// or a tool with a pattern (`Bash(git status*)`, `Edit(/workspace/**)`),
// which matches the tool's requests whose whole target the pattern
// matches; `*` (and `**`) matches any run of characters, `/` included.
// Deny rules win over ask rules, ask over allow, and Default decides the
// rest (empty: ask).
type Policy struct {
	Default Verdict  `json:"default,omitempty" yaml:"default" msgpack:"default,omitempty"`
	Allow   []string `json:"allow,omitempty" yaml:"allow" msgpack:"allow,omitempty"`
	Ask     []string `json:"ask,omitempty" yaml:"ask" msgpack:"ask,omitempty"`
	Deny    []string `json:"deny,omitempty" yaml:"deny" msgpack:"deny,omitempty"`
}

// MaxRuleBytes bounds one rule.
const MaxRuleBytes = 1024

// Validate reports every bad rule of p and a default that is not a
// verdict, joined; each wraps ErrBadRule and names the rule.
func (p Policy) Validate() error {
	var errs []error
	switch p.Default {
	case "", Allow, Ask, Deny:
	default:
		errs = append(errs, fmt.Errorf("%w: default %q must be allow, ask or deny", ErrBadRule, p.Default))
	}
	for _, l := range p.lists() {
		for i, s := range l.rules {
			if _, err := parseRule(s); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s[%d] %q: %v", ErrBadRule, l.verdict, i, s, err))
			}
		}
	}
	return errors.Join(errs...)
}

type ruleList struct {
	verdict Verdict
	rules   []string
}

// lists are p's rules in the order of precedence.
func (p Policy) lists() []ruleList {
	return []ruleList{{Deny, p.Deny}, {Ask, p.Ask}, {Allow, p.Allow}}
}

// defaultVerdict is p's default, Ask when it sets none.
func (p Policy) defaultVerdict() Verdict {
	if p.Default == "" {
		return Ask
	}
	return p.Default
}

// Decision is a policy's verdict on a request and the rule that gave it:
// "deny: Bash(curl *)", or "default: ask".
type Decision struct {
	Verdict Verdict `json:"verdict"`
	Rule    string  `json:"rule"`
}

// Decide decides r: deny > ask > allow > default. A target of several
// lines (a Codex file change's paths, a multi-line command) is decided
// whole and line by line, and the strictest decision stands, so no line
// passes a rule another line is denied by. A policy that does not
// validate denies everything: an unreadable rule must not let anything
// through.
func (p Policy) Decide(r Request) Decision {
	if err := p.Validate(); err != nil {
		return Decision{Verdict: Deny, Rule: "deny: invalid policy"}
	}
	targets := []string{r.Target}
	if strings.Contains(r.Target, "\n") {
		targets = append(targets, strings.Split(r.Target, "\n")...)
	}
	var d Decision
	for i, t := range targets {
		if di := p.decideOne(r.Tool, t); i == 0 || di.Verdict.strictness() > d.Verdict.strictness() {
			d = di
		}
	}
	return d
}

func (p Policy) decideOne(tool, target string) Decision {
	for _, l := range p.lists() {
		for _, s := range l.rules {
			if rl, _ := parseRule(s); rl.matches(tool, target) {
				return Decision{Verdict: l.verdict, Rule: string(l.verdict) + ": " + s}
			}
		}
	}
	d := p.defaultVerdict()
	return Decision{Verdict: d, Rule: "default: " + string(d)}
}

// rule is a parsed rule; pattern is "*" for a bare tool name (which
// matches every target, as "*" does).
type rule struct {
	tool, pattern string
}

func parseRule(s string) (rule, error) {
	switch {
	case s == "":
		return rule{}, errors.New("empty")
	case len(s) > MaxRuleBytes:
		return rule{}, fmt.Errorf("%d bytes, limit %d", len(s), MaxRuleBytes)
	case !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\n"):
		return rule{}, errors.New("must be one line of UTF-8 without NUL")
	}
	tool, pattern, hasPattern := strings.Cut(s, "(")
	if !validTool(tool) {
		return rule{}, fmt.Errorf("tool %q must match [A-Za-z0-9_.-]{1,128} (write Tool or Tool(pattern))", tool)
	}
	if !hasPattern {
		return rule{tool: tool, pattern: "*"}, nil
	}
	pattern, closed := strings.CutSuffix(pattern, ")")
	switch {
	case !closed:
		return rule{}, errors.New("the pattern must end with ) (write Tool(pattern))")
	case pattern == "":
		return rule{}, fmt.Errorf("empty pattern (write %s to match every request of the tool)", tool)
	}
	return rule{tool: tool, pattern: collapseStars(pattern)}, nil
}

func validTool(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	for _, c := range []byte(t) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// collapseStars makes "**" (and longer runs) "*": they match the same.
func collapseStars(p string) string {
	for strings.Contains(p, "**") {
		p = strings.ReplaceAll(p, "**", "*")
	}
	return p
}

func (rl rule) matches(tool, target string) bool {
	return rl.tool != "" && rl.tool == tool && glob(rl.pattern, target)
}

// covers reports whether every request x matches, rl matches too. It may
// say no where the answer is yes (x's matches split over several
// rules), never yes where it is no: x's pattern, its stars kept as
// stars, is matched against rl's, and a literal never matches a star, so
// only a star of rl's takes one of x's.
func (rl rule) covers(x rule) bool {
	return rl.tool != "" && rl.tool == x.tool && glob(rl.pattern, x.pattern)
}

// glob matches s against pattern, anchored at both ends; '*' matches any
// run of bytes. Linear backtracking: the last star takes one more byte
// when what follows it fails.
func glob(pattern, s string) bool {
	p, i := 0, 0
	star, from := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, from = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			from++
			p, i = star+1, from
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Narrow is p narrowed by a job's policy: for every request its decision
// is at least as strict as p's and as job's, so a job may narrow its
// profile's policy but never widen it. job's empty default has no
// opinion (only its rules count); p's empty default is ask.
//
// The result is one policy of rules (it is stored with the run): deny
// rules of either, ask rules of either that both let go no further than
// ask (else deny), allow rules of either that both allow (else ask, when
// the default is deny and both let the rule go that far; else dropped,
// for the default to decide), and the stricter default. "Both allow" is
// read from single rules covering the rule, so the result may be
// stricter than the strictest of the two where a rule is covered only by
// several rules together; it is never less strict.
func (p Policy) Narrow(job Policy) Policy {
	dp, dj := p.defaultVerdict(), job.Default
	if dj == "" {
		dj = Allow // no opinion
	}
	def := dp
	if dj.strictness() > def.strictness() {
		def = dj
	}
	out := Policy{Default: def}
	add := func(list *[]string, s string) {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	for _, s := range slices.Concat(p.Deny, job.Deny) {
		add(&out.Deny, s)
	}
	// A rule a deny rule covers decides nothing: it is left out.
	denied := func(s string) bool {
		x, err := parseRule(s)
		return err == nil && slices.ContainsFunc(out.Deny, func(d string) bool {
			rl, err := parseRule(d)
			return err == nil && rl.covers(x)
		})
	}
	for _, s := range slices.Concat(p.Ask, job.Ask) {
		switch {
		case denied(s):
		case atMost(p, dp, s, Ask) && atMost(job, dj, s, Ask):
			add(&out.Ask, s)
		default:
			// Dropped, an allow rule of the result could take its
			// requests: one of the two says deny to them.
			add(&out.Deny, s)
		}
	}
	for _, s := range slices.Concat(p.Allow, job.Allow) {
		switch {
		case denied(s):
		case atMost(p, dp, s, Allow) && atMost(job, dj, s, Allow):
			add(&out.Allow, s)
		case def == Deny && atMost(p, dp, s, Ask) && atMost(job, dj, s, Ask):
			add(&out.Ask, s)
		}
	}
	return out
}

// atMost reports whether q (whose default is def) decides every request
// rule s matches no stricter than v, leaving aside q's deny rules (which
// the narrowed policy keeps, first) and, for v Allow, q's ask rules
// (which it keeps as ask or deny rules, before its allow rules).
func atMost(q Policy, def Verdict, s string, v Verdict) bool {
	if def.strictness() <= v.strictness() {
		return true
	}
	x, err := parseRule(s)
	if err != nil {
		return false
	}
	lists := [][]string{q.Allow}
	if v == Ask {
		lists = append(lists, q.Ask)
	}
	for _, l := range lists {
		for _, c := range l {
			if rl, err := parseRule(c); err == nil && rl.covers(x) {
				return true
			}
		}
	}
	return false
}
