package protocol_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

func TestJobPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       *policy.Policy
		err        error
		msg        string
	}{
		{"narrow", `{"default":"deny","allow":["Read"],"ask":["Bash(git push*)"],"deny":["Bash(curl *)"]}`,
			&policy.Policy{Default: policy.Deny, Allow: []string{"Read"}, Ask: []string{"Bash(git push*)"}, Deny: []string{"Bash(curl *)"}}, nil, ""},
		{"deny only", `{"deny":["Write(/workspace/.github/**)"]}`, &policy.Policy{Deny: []string{"Write(/workspace/.github/**)"}}, nil, ""},
		{"null", `null`, nil, nil, ""},
		{"empty", `{}`, nil, nil, ""},
		{"empty lists", `{"allow":[],"deny":null}`, nil, nil, ""},
		{"not an object", `["Read"]`, nil, protocol.ErrMalformedJob, `field "policy" must be an object like`},
		{"a string", `"deny"`, nil, protocol.ErrMalformedJob, `field "policy" must be an object like`},
		{"default not a string", `{"default":false}`, nil, protocol.ErrMalformedJob, `field "policy.default" must be a string, not a boolean`},
		{"rules not a list", `{"deny":"Bash"}`, nil, protocol.ErrMalformedJob, `field "policy.deny" must be an array of strings`},
		{"rule not a string", `{"allow":["Read",1]}`, nil, protocol.ErrMalformedJob, `field "policy.allow" must be an array of strings; element 1 is a number`},
		{"unknown key", `{"capabilities":{}}`, nil, protocol.ErrUnknownField, `field "policy" has no key "capabilities" (keys: default, allow, ask, deny)`},
		{"twice", `{"deny":[],"deny":["Read"]}`, nil, protocol.ErrMalformedJob, `field "policy" has the key "deny" twice`},
		{"bad default", `{"default":"maybe"}`, nil, protocol.ErrInvalidJob, `policy: default "maybe" must be allow, ask or deny`},
		{"bad rule", `{"deny":["Read","Bash(curl *"]}`, nil, protocol.ErrInvalidJob, `policy: deny[1] "Bash(curl *": the pattern must end with )`},
		{"long bad rule", `{"deny":["Bash(` + strings.Repeat("a", 2000) + `"]}`, nil, protocol.ErrInvalidJob, `policy: deny[0] "Bash(aaa`},
		{"too many rules", `{"deny":["Read"` + strings.Repeat(`,"Read"`, protocol.MaxPolicyRules) + `]}`, nil, protocol.ErrOversize, `field "policy" has 65 rules, limit 64`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err, mj, merr := decodeWithField(t, "policy", tc.json)
			for _, got := range []struct {
				enc string
				j   protocol.Job
				err error
			}{{"json", j, err}, {"msgpack", mj, merr}} {
				if tc.err != nil {
					if tc.name == "twice" && got.enc == "msgpack" {
						continue // a Go map has no duplicate key
					}
					if !errors.Is(got.err, tc.err) || !strings.Contains(got.err.Error(), tc.msg) || len(got.err.Error()) > 400 {
						t.Fatalf("%s: %v, want %v with %q", got.enc, got.err, tc.err, tc.msg)
					}
					continue
				}
				if got.err != nil || !reflect.DeepEqual(got.j.Policy, tc.want) {
					t.Fatalf("%s: %+v, %v", got.enc, got.j.Policy, got.err)
				}
				if tc.want == nil {
					continue
				}
				for _, encode := range []func(protocol.Job) ([]byte, error){protocol.EncodeJob, protocol.EncodeJobMsgpack} {
					b, err := encode(got.j)
					if err != nil {
						t.Fatal(err)
					}
					ct := ""
					if b[0] != '{' {
						ct = protocol.ContentTypeMsgpack
					}
					back, err := protocol.DecodeJob(b, ct, protocol.Limits{})
					if err != nil || !reflect.DeepEqual(back, got.j) {
						t.Fatalf("%s re-encoded %q: %+v, %v", got.enc, b, back, err)
					}
				}
			}
		})
	}
}
