package config

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// resolveGit is the clone of a job's workspace.git under profile p: its
// host must be on the profile's allowlist (the clone goes through the
// run's egress), and a secret with header "basic" for that host, if the
// profile has one, is its credential (over https only: the proxy puts a
// value in over TLS it terminates). A job that cannot be cloned here is
// rejected with protocol.ErrNotAllowed, naming the repository.
func resolveGit(job protocol.Job, secrets []runspec.Secret, net runspec.Network) (*runspec.Git, error) {
	if job.Workspace == nil || job.Workspace.Git == nil {
		return nil, nil
	}
	g := job.Workspace.Git
	u, err := url.Parse(g.URL)
	if err != nil { // a decoded job's URL parses
		return nil, reject(protocol.ErrInvalidJob, "workspace.git.url %q is not a URL", g.URL)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	allowed := net.AllowsName(host)
	if a, err := netip.ParseAddr(host); err == nil {
		allowed = slices.ContainsFunc(net.Prefixes(), func(p netip.Prefix) bool { return p.Contains(a.Unmap()) })
	}
	if !allowed {
		return nil, reject(protocol.ErrNotAllowed, "workspace repository %s: host %q is not on profile %q's network.allow, so the run cannot reach it", g.URL, host, job.Profile)
	}
	out := &runspec.Git{URL: g.URL, Ref: g.Ref, Depth: g.DepthOrDefault()}
	for _, s := range secrets { // sorted by name
		if s.Header == runspec.HeaderBasic && slices.Contains(s.Hosts, host) {
			if u.Scheme != "https" {
				return nil, reject(protocol.ErrNotAllowed, "workspace repository %s: secret %s is for %s over https only, not %s://", g.URL, s.Name, host, u.Scheme)
			}
			out.Secret = s.Name
			break
		}
	}
	return out, nil
}
