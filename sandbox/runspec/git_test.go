package runspec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

// TestGitValidate: the spec's repository is checked again where argv is
// built from it.
func TestGitValidate(t *testing.T) {
	env := []string{"PATH=/usr/bin", "GIT_TOKEN=baton-secret-git-token-00"}
	for _, tc := range []struct {
		name string
		g    runspec.Git
		ok   bool
	}{
		{"https", runspec.Git{URL: "https://h/r.git", Ref: "main", Depth: 1, Secret: "GIT_TOKEN"}, true},
		{"http, no secret", runspec.Git{URL: "http://h/r", Depth: 3}, true},
		{"ssh", runspec.Git{URL: "ssh://h/r", Depth: 1}, false},
		{"ext", runspec.Git{URL: "ext::sh -c id", Depth: 1}, false},
		{"credential", runspec.Git{URL: "https://u:p@h/r", Depth: 1}, false},
		{"option ref", runspec.Git{URL: "https://h/r", Ref: "--upload-pack=id", Depth: 1}, false},
		{"no depth", runspec.Git{URL: "https://h/r"}, false},
		{"secret not in env", runspec.Git{URL: "https://h/r", Depth: 1, Secret: "OTHER"}, false},
	} {
		err := tc.g.Validate(env)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, runspec.ErrInvalidSpec)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestIsCommitID(t *testing.T) {
	for s, want := range map[string]bool{
		strings.Repeat("a", 40): true, strings.Repeat("0", 64): true, "0123456789abcdef0123456789abcdef01234567": true,
		"": false, strings.Repeat("a", 39): false, strings.Repeat("a", 41): false, strings.Repeat("A", 40): false,
		strings.Repeat("g", 40): false, strings.Repeat("a", 39) + "\n": false, strings.Repeat("a", 63) + " ": false,
	} {
		if got := runspec.IsCommitID(s); got != want {
			t.Errorf("IsCommitID(%q) = %v, want %v", s, got, want)
		}
	}
}
