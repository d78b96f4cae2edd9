package runspec_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestAllowsName(t *testing.T) {
	n := runspec.Network{Allow: []string{"api.example.com", ".example.org", "10.0.0.0/8"}}
	for host, want := range map[string]bool{
		"api.example.com":     true,
		"API.Example.COM.":    true,
		"x.api.example.com":   false,
		"example.com":         false,
		"a.example.org":       true,
		"a.b.example.org":     true,
		"example.org":         false, // a suffix entry names what is under it
		"badexample.org":      false,
		"example.org.evil.io": false,
		"10.1.2.3":            false, // addresses go by the CIDR entries
		"":                    false,
		".example.org":        false,
		"a..example.org":      false,
	} {
		if got := n.AllowsName(host); got != want {
			t.Errorf("AllowsName(%q) = %v, want %v", host, got, want)
		}
	}
	if (runspec.Network{}).AllowsName("api.example.com") {
		t.Error("an empty network allows a name")
	}
}

func TestNetworkJSON(t *testing.T) {
	// The sandbox spec carries a Network as JSON; none is an empty object.
	for _, tc := range []struct {
		n    runspec.Network
		want string
	}{
		{runspec.Network{}, `{}`},
		{runspec.Network{Allow: []string{"a.example.com", ".example.org"}}, `{"allow":["a.example.com",".example.org"]}`},
	} {
		b, err := json.Marshal(tc.n)
		if err != nil || string(b) != tc.want {
			t.Fatalf("Marshal(%+v) = %s, %v; want %s", tc.n, b, err, tc.want)
		}
		var back runspec.Network
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.n) {
			t.Fatalf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
}

func TestRlimitValueJSON(t *testing.T) {
	l := runspec.Limits{Pids: 5, Rlimits: runspec.Rlimits{"as": runspec.Unlimited, "nofile": 64}}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"pids":5,"rlimits":{"as":"unlimited","nofile":64}}` {
		t.Fatalf("json = %s", b)
	}
	var back runspec.Limits
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Fatalf("back = %+v, %v", back, err)
	}
	for _, bad := range []string{`{"rlimits":{"as":"lots"}}`, `{"rlimits":{"as":-1}}`, `{"rlimits":{"as":1.5}}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}
