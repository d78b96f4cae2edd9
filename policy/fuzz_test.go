package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRequest: no line makes the Reader panic, and every request it reads
// has a plain approval id, is decided, and answers with one JSON line
// carrying its id back.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{claudeBash, codexCommand, codexFile, codexFileStarted, codexFileCompleted,
		`{"type":"control_request","request_id":1.5e300,"request":{"subtype":"can_use_tool","tool_name":"Read","input":{"file_path":"a\nb"}}}`,
		`{"method":"item/commandExecution/requestApproval","id":"x","params":{"command":"/bin/bash -lc \"a\\\\\"","commandActions":null}}`,
		`{"method":"item/fileChange/requestApproval","id":-1,"params":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var rd Reader
		rd.Observe([]byte(codexFileStarted))
		rd.Observe(line)
		r, ok := rd.Request(line)
		if !ok {
			return
		}
		if !MayBeRequest(line) {
			t.Fatalf("read %s, which MayBeRequest refuses", line)
		}
		if id := r.ApprovalID(); !plainToken(id) {
			t.Fatalf("approval id %q of %s", id, line)
		}
		if d := issuePolicy.Decide(r); d.Rule == "" {
			t.Fatalf("no rule decided %+v", r)
		}
		for _, allow := range []bool{true, false} {
			a := r.Answer(allow, "m")
			if !json.Valid(a) || strings.ContainsRune(string(a), '\n') {
				t.Fatalf("answer %q is not one JSON line", a)
			}
			if id, got, _, ok := Answered(a); !ok || got != allow || !json.Valid(id) {
				t.Fatalf("answer %s is not read back", a)
			}
		}
		if f := r.FollowUp("retry"); !json.Valid(f) {
			t.Fatalf("follow-up %q", f)
		}
	})
}

// FuzzRule: no rule makes parsing or matching panic; a valid rule matches
// its own pattern taken literally, covers itself, and a policy of it
// validates and decides with it.
func FuzzRule(f *testing.F) {
	for _, s := range []string{"Read", "Bash(git status*)", "Write(/workspace/.github/**)", "Bash(curl *", "Bash()", "(x)", "mcp__a__b", "Bash(**a**b*)", "Bash(())"} {
		f.Add(s, "git status --short")
	}
	f.Fuzz(func(t *testing.T, s, target string) {
		rl, err := parseRule(s)
		p := Policy{Deny: []string{s}}
		if verr := p.Validate(); (err == nil) != (verr == nil) {
			t.Fatalf("parseRule(%q): %v, Validate: %v", s, err, verr)
		}
		d := p.Decide(Request{Tool: rl.tool, Target: target})
		if err != nil {
			if d.Verdict != Deny {
				t.Fatalf("an invalid policy decided %+v", d)
			}
			return
		}
		if !rl.covers(rl) {
			t.Fatalf("%q does not cover itself", s)
		}
		if lit := strings.ReplaceAll(rl.pattern, "*", ""); !rl.matches(rl.tool, lit) {
			t.Fatalf("%q does not match %q", s, lit)
		}
		if rl.matches(rl.tool, target) != (d.Rule == "deny: "+s) && !strings.Contains(target, "\n") {
			t.Fatalf("%q matches %q: %v, but Decide says %+v", s, target, rl.matches(rl.tool, target), d)
		}
	})
}
