package chain

import (
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestNetMode(t *testing.T) {
	for _, c := range []struct {
		allow []string
		want  string
	}{
		{nil, NetNone},
		{[]string{"api.example.com"}, NetProxy},
		{[]string{"api.example.com", ".example.org"}, NetProxy},
		{[]string{"api.example.com", "10.0.0.0/8"}, NetPasta},
		{[]string{"fd00::/8"}, NetPasta},
	} {
		if got := NetMode(runspec.Network{Allow: c.allow}); got != c.want {
			t.Errorf("NetMode(%q) = %s, want %s", c.allow, got, c.want)
		}
	}
}
