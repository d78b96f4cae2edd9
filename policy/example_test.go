package policy_test

import (
	"fmt"

	"github.com/batonhq/baton/policy"
)

// A profile's policy, narrowed by a job's, decides the prompts an agent
// prints; baton answers an allow or a deny itself.
func Example() {
	profile := policy.Policy{Default: policy.Ask,
		Allow: []string{"Read", "Grep", "Bash(git status*)", "Bash(npm test*)"},
		Ask:   []string{"Bash(git push*)"},
		Deny:  []string{"Bash(curl *)", "Write(/workspace/.github/**)"}}
	job := policy.Policy{Deny: []string{"Bash(npm test -- --update*)"}}
	p := profile.Narrow(job)

	var rd policy.Reader
	for _, line := range []string{
		`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"git status --short"}}}`,
		`{"type":"control_request","request_id":"r2","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"npm test -- --update-snapshots"}}}`,
		`{"method":"item/commandExecution/requestApproval","id":7,"params":{"threadId":"t1","itemId":"i1","command":"/bin/bash -lc 'git push origin main'"}}`,
	} {
		rd.Observe([]byte(line))
		r, ok := rd.Request([]byte(line))
		if !ok {
			continue
		}
		d := p.Decide(r)
		fmt.Printf("%s %s %q: %s (%s)\n", r.ApprovalID(), r.Tool, r.Target, d.Verdict, d.Rule)
		switch d.Verdict {
		case policy.Allow:
			fmt.Printf("  stdin: %s\n", r.Answer(true, ""))
		case policy.Deny:
			fmt.Printf("  stdin: %s\n", r.Answer(false, "denied by "+d.Rule))
		}
	}
	// Output:
	// r1 Bash "git status --short": allow (allow: Bash(git status*))
	//   stdin: {"response":{"request_id":"r1","response":{"behavior":"allow","updatedInput":{"command":"git status --short"}},"subtype":"success"},"type":"control_response"}
	// r2 Bash "npm test -- --update-snapshots": deny (deny: Bash(npm test -- --update*))
	//   stdin: {"response":{"request_id":"r2","response":{"behavior":"deny","message":"denied by deny: Bash(npm test -- --update*)"},"subtype":"success"},"type":"control_response"}
	// 7 Bash "git push origin main": ask (ask: Bash(git push*))
}
