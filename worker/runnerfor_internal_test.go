package worker

import (
	"testing"

	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// TestRunnerFor: a run with secrets runs its stages from baton, which
// links their TLS; any other from baton-runner.
func TestRunnerFor(t *testing.T) {
	w := &Worker{binary: "/opt/baton", runner: "/opt/baton-runner"}
	for _, tc := range []struct {
		name string
		net  runspec.Network
		want string
	}{
		{"no network", runspec.Network{}, "/opt/baton-runner"},
		{"an allowlist", runspec.Network{Allow: []string{"api.example.com"}}, "/opt/baton-runner"},
		{"a secret", runspec.Network{Allow: []string{"api.example.com"}, Secrets: []runspec.Secret{{Name: "K", Hosts: []string{"api.example.com"}}}}, "/opt/baton"},
	} {
		if got := w.runnerFor(sandbox.Spec{Network: tc.net}); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
