package policy

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string // "" for valid; else a part of the error
	}{
		{Policy{}, ""},
		{Policy{Default: Deny, Allow: []string{"Read", "Grep", "Bash(git status*)", "mcp__github__create_issue"},
			Ask: []string{"Bash(git push*)"}, Deny: []string{"Bash(curl *)", "Write(/workspace/.github/**)"}}, ""},
		{Policy{Allow: []string{"Bash(echo (a))"}}, ""}, // the pattern runs to the last )
		{Policy{Default: "maybe"}, `default "maybe" must be allow, ask or deny`},
		{Policy{Allow: []string{""}}, `allow[0] "": empty`},
		{Policy{Deny: []string{"Bash(curl *"}}, `deny[0] "Bash(curl *": the pattern must end with )`},
		{Policy{Ask: []string{"Bash()"}}, `ask[0] "Bash()": empty pattern (write Bash`},
		{Policy{Allow: []string{"Read", "bash command(x)"}}, `allow[1] "bash command(x)": tool "bash command" must match`},
		{Policy{Allow: []string{"(x)"}}, `tool "" must match`},
		{Policy{Deny: []string{"Bash(a\nb)"}}, "one line"},
		{Policy{Deny: []string{"Bash(" + strings.Repeat("a", MaxRuleBytes) + ")"}}, "limit 1024"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrBadRule)):
			t.Errorf("%+v: %v, want ErrBadRule with %q", tc.p, err, tc.want)
		}
	}
	// Every problem, each naming its rule.
	err := Policy{Default: "no", Allow: []string{"a b"}, Deny: []string{"x("}}.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("three problems: %v", err)
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"git status*", "git status", true},
		{"git status*", "git status --short", true},
		{"git status*", "sudo git status", false}, // anchored at the start
		{"*.go", "a/b/c.go", true},                // * takes /
		{"/workspace/.github/*", "/workspace/.github/workflows/ci.yml", true},
		{"/workspace/.github/*", "/workspace/.githubx", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYcZ", false}, // anchored at the end
		{"", "", true},
		{"", "x", false},
		{"*", "", true},
		{"curl *", "curl", false},
		{"*curl*", "echo hi | curl -d @- evil", true},
	} {
		if got := glob(collapseStars(tc.pattern), tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// issuePolicy is issue 29's example.
var issuePolicy = Policy{Default: Ask,
	Allow: []string{"Read", "Grep", "Bash(git status*)", "Bash(npm test*)"},
	Ask:   []string{"Bash(git push*)"},
	Deny:  []string{"Bash(curl *)", "Write(/workspace/.github/**)"}}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		r    Request
		want Decision
	}{
		{issuePolicy, Request{Tool: "Read", Target: "/etc/passwd"}, Decision{Allow, "allow: Read"}},
		{issuePolicy, Request{Tool: "Bash", Target: "git status --short"}, Decision{Allow, "allow: Bash(git status*)"}},
		{issuePolicy, Request{Tool: "Bash", Target: "git push origin main"}, Decision{Ask, "ask: Bash(git push*)"}},
		{issuePolicy, Request{Tool: "Bash", Target: "curl https://x"}, Decision{Deny, "deny: Bash(curl *)"}},
		{issuePolicy, Request{Tool: "Bash", Target: "rm -rf /"}, Decision{Ask, "default: ask"}},
		{issuePolicy, Request{Tool: "Write", Target: "/workspace/.github/workflows/ci.yml"}, Decision{Deny, "deny: Write(/workspace/.github/**)"}},
		{issuePolicy, Request{Tool: "Write", Target: "/workspace/main.go"}, Decision{Ask, "default: ask"}},
		{issuePolicy, Request{Tool: "read", Target: "x"}, Decision{Ask, "default: ask"}}, // tool names match exactly
		// A line of a command is decided on its own: the allowed first
		// line does not carry the denied second.
		{issuePolicy, Request{Tool: "Bash", Target: "git status\ncurl https://x"}, Decision{Deny, "deny: Bash(curl *)"}},
		// Every path of a file change must pass.
		{Policy{Default: Deny, Allow: []string{"Edit(/workspace/*)"}}, Request{Tool: "Edit", Target: "/workspace/a.go\n/etc/hosts"}, Decision{Deny, "default: deny"}},
		{Policy{Default: Deny, Allow: []string{"Edit(/workspace/*)"}}, Request{Tool: "Edit", Target: "/workspace/a.go\n/workspace/b.go"}, Decision{Allow, "allow: Edit(/workspace/*)"}},
		// deny > ask > allow, whatever the lists' order in the file.
		{Policy{Allow: []string{"Bash"}, Ask: []string{"Bash(git *)"}, Deny: []string{"Bash(git push*)"}}, Request{Tool: "Bash", Target: "git push"}, Decision{Deny, "deny: Bash(git push*)"}},
		{Policy{Allow: []string{"Bash"}, Ask: []string{"Bash(git *)"}}, Request{Tool: "Bash", Target: "git log"}, Decision{Ask, "ask: Bash(git *)"}},
		{Policy{Default: Allow}, Request{Tool: "mcp__github__create_issue"}, Decision{Allow, "default: allow"}},
		{Policy{Allow: []string{"mcp__github__create_issue"}}, Request{Tool: "mcp__github__create_issue"}, Decision{Allow, "allow: mcp__github__create_issue"}},
		// A policy nobody validated fails closed.
		{Policy{Default: Allow, Deny: []string{"Bash(curl *"}}, Request{Tool: "Read"}, Decision{Deny, "deny: invalid policy"}},
	} {
		if got := tc.p.Decide(tc.r); got != tc.want {
			t.Errorf("%+v decides %q %q: %+v, want %+v", tc.p, tc.r.Tool, tc.r.Target, got, tc.want)
		}
	}
}

// jobDecide is a job policy's own decision, nil when it has no opinion
// (no rule matches and it sets no default).
func jobDecide(j Policy, r Request) *Verdict {
	d := j.Decide(r)
	if j.Default == "" && d.Rule == "default: ask" {
		return nil
	}
	return &d.Verdict
}

func TestNarrow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		job      Policy
		r        Request
		want     Verdict
		narrowed Policy
	}{
		{"an empty job changes nothing", Policy{}, Request{Tool: "Read"}, Allow, issuePolicy},
		{"a job's deny rule is added", Policy{Deny: []string{"Bash(rm *)"}}, Request{Tool: "Bash", Target: "rm -rf /"}, Deny,
			Policy{Default: Ask, Allow: issuePolicy.Allow, Ask: issuePolicy.Ask, Deny: append(append([]string{}, issuePolicy.Deny...), "Bash(rm *)")}},
		{"a job cannot allow what the profile asks", Policy{Allow: []string{"Bash(git push*)"}}, Request{Tool: "Bash", Target: "git push"}, Ask, Policy{}},
		{"nor widen the default", Policy{Default: Allow}, Request{Tool: "Bash", Target: "make"}, Ask, Policy{}},
		{"a job may ask what the profile allows", Policy{Ask: []string{"Read(/etc/*)"}}, Request{Tool: "Read", Target: "/etc/passwd"}, Ask, Policy{}},
		{"a job's deny default keeps only what it lets through", Policy{Default: Deny, Allow: []string{"Read"}},
			Request{Tool: "Grep", Target: "x"}, Deny,
			Policy{Default: Deny, Allow: []string{"Read"}, Deny: []string{"Bash(curl *)", "Write(/workspace/.github/**)", "Bash(git push*)"}}},
		{"... and what it lets through is still the profile's to ask", Policy{Default: Deny, Allow: []string{"Read", "Bash(npm *)"}},
			Request{Tool: "Bash", Target: "npm publish"}, Ask, Policy{}},
		{"... which allows the part it allows", Policy{Default: Deny, Allow: []string{"Read", "Bash(npm test)"}},
			Request{Tool: "Bash", Target: "npm test"}, Allow, Policy{}},
	} {
		n := issuePolicy.Narrow(tc.job)
		if got := n.Decide(tc.r).Verdict; got != tc.want {
			t.Errorf("%s: %+v decides %q %q: %s, want %s", tc.name, n, tc.r.Tool, tc.r.Target, got, tc.want)
		}
		if tc.narrowed.Default != "" && !reflect.DeepEqual(n, tc.narrowed) {
			t.Errorf("%s: narrowed to %+v, want %+v", tc.name, n, tc.narrowed)
		}
	}
}

// TestNarrowNeverWidens: for random policies and requests, the narrowed
// policy decides every request at least as strictly as the profile's and
// the job's, and it survives JSON (it is stored in the run record).
func TestNarrowNeverWidens(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	tools := []string{"Bash", "Read", "Edit"}
	patterns := []string{"", "*", "git *", "git status*", "git push*", "curl *", "*curl*", "/w/*", "/w/.github/*", "/w/a.go", "npm test"}
	targets := []string{"", "git status", "git push origin", "curl x", "echo hi | curl x", "/w/a.go", "/w/.github/ci.yml", "/etc/passwd", "npm test", "git status\ncurl x"}
	verdicts := []Verdict{"", Allow, Ask, Deny}
	rules := func() []string {
		var out []string
		for range rng.IntN(4) {
			tool, pat := tools[rng.IntN(len(tools))], patterns[rng.IntN(len(patterns))]
			if pat == "" {
				out = append(out, tool)
			} else {
				out = append(out, tool+"("+pat+")")
			}
		}
		return out
	}
	policy := func() Policy {
		return Policy{Default: verdicts[rng.IntN(len(verdicts))], Allow: rules(), Ask: rules(), Deny: rules()}
	}
	for i := range 20000 {
		p, j := policy(), policy()
		n := p.Narrow(j)
		if err := n.Validate(); err != nil {
			t.Fatalf("narrowed %+v by %+v: %v", p, j, err)
		}
		b, _ := json.Marshal(n)
		var back Policy
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, n) {
			t.Fatalf("narrowed policy %+v does not survive JSON: %s -> %+v (%v)", n, b, back, err)
		}
		for range 5 {
			r := Request{Tool: tools[rng.IntN(len(tools))], Target: targets[rng.IntN(len(targets))]}
			got := n.Decide(r).Verdict
			if pv := p.Decide(r).Verdict; got.strictness() < pv.strictness() {
				t.Fatalf("case %d: %+v narrowed by %+v = %+v decides %+v %s, wider than the profile's %s", i, p, j, n, r, got, pv)
			}
			if jv := jobDecide(j, r); jv != nil && got.strictness() < jv.strictness() {
				t.Fatalf("case %d: %+v narrowed by %+v = %+v decides %+v %s, wider than the job's %s", i, p, j, n, r, got, *jv)
			}
		}
		// A job with no rules and no default changes nothing.
		if i < 2000 {
			same := p.Narrow(Policy{})
			for _, tool := range tools {
				for _, target := range targets {
					r := Request{Tool: tool, Target: target}
					if a, b := p.Decide(r).Verdict, same.Decide(r).Verdict; a != b {
						t.Fatalf("%+v narrowed by nothing = %+v decides %+v %s, not %s", p, same, r, b, a)
					}
				}
			}
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		wide, narrow string
		want         bool
	}{
		{"Bash", "Bash(git *)", true},
		{"Bash(git *)", "Bash(git status*)", true},
		{"Bash(git status*)", "Bash(git *)", false},
		{"Bash(*)", "Bash", true},
		{"Bash(git *)", "Bash", false},
		{"Bash(*.go)", "Bash(a*.go)", true},
		{"Read", "Bash", false},
		{"Edit(/w/**)", "Edit(/w/a/*)", true},
	} {
		w, _ := parseRule(tc.wide)
		n, _ := parseRule(tc.narrow)
		if got := w.covers(n); got != tc.want {
			t.Errorf("%s covers %s: %v, want %v", tc.wide, tc.narrow, got, tc.want)
		}
	}
}
