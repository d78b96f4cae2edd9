package runspec

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Git is a repository the exec stage clones into the run's empty
// workspace, as the agent's user and through the run's egress, before it
// executes the agent (the job's workspace.git, checked by package
// protocol; checked again here, where argv is built from it).
type Git struct {
	URL   string `json:"url"`
	Ref   string `json:"ref,omitempty"` // empty: the remote's HEAD
	Depth int    `json:"depth"`
	// Secret names the agent's environment variable that holds the
	// placeholder of the profile secret (header "basic") sent as the
	// password: the proxy puts the value in its place. Empty: none.
	Secret string `json:"secret,omitempty"`
}

// GitUser is the user name of the Basic credential a clone sends: forges
// (GitHub, GitLab, Gitea) read the token from the password and accept
// any user.
const GitUser = "x-access-token"

// Validate checks what the exec stage's argv and environment are built
// from: an http(s) URL without a credential, a ref git cannot take for an
// option, a depth of at least 1, and a secret the environment names.
func (g *Git) Validate(env []string) error {
	u, err := url.Parse(g.URL)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fmt.Errorf("%w: git url %q must be an http(s) URL", ErrInvalidSpec, g.URL)
	case u.User != nil:
		return fmt.Errorf("%w: git url of host %s must not carry a credential", ErrInvalidSpec, u.Host)
	case strings.HasPrefix(g.Ref, "-") || strings.ContainsAny(g.Ref, " \t\n\x00:"):
		return fmt.Errorf("%w: git ref %q", ErrInvalidSpec, g.Ref)
	case g.Depth < 1:
		return fmt.Errorf("%w: git depth %d must be at least 1", ErrInvalidSpec, g.Depth)
	case g.Secret != "" && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, g.Secret+"=") }):
		return fmt.Errorf("%w: git secret %q is not in the environment", ErrInvalidSpec, g.Secret)
	}
	return nil
}

// IsCommitID reports whether s is a full commit id, SHA-1 or SHA-256, in
// lower-case hex, as git prints one. (No regexp: the runner links none.)
func IsCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
