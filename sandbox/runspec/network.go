package runspec

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Network is "none" (no Allow: loopback only) or an egress allowlist.
type Network struct {
	// Allow lists what the agent may reach, lower-cased: host names, an
	// entry with a leading dot (".example.org") for every name under it,
	// and CIDR prefixes ("10.20.0.0/16") of private or link-local
	// addresses the agent may reach although they are not public. Empty
	// means none.
	Allow []string `json:"allow,omitempty"`
	// Hosts pins allowed names to addresses, as /etc/hosts would, for
	// names the resolver does not know (a test host, an internal service).
	Hosts map[string]string `json:"hosts,omitempty"`
	// Secrets are the credentials the egress proxy adds to requests to
	// their hosts; the agent holds only their placeholders.
	Secrets []Secret `json:"secrets,omitempty"`
	// UpstreamCA is PEM certificates the proxy trusts, beside the host's
	// roots, when it connects to a secret's host (an internal CA, a test
	// server's).
	UpstreamCA string `json:"upstreamCA,omitempty"`
}

// Names are the allowlist's host name entries (".example.org" suffixes
// included), in order.
func (n Network) Names() []string {
	var out []string
	for _, e := range n.Allow {
		if !isPrefixEntry(e) {
			out = append(out, e)
		}
	}
	return out
}

// isPrefixEntry tells a CIDR entry from a host name: an address, a slash.
func isPrefixEntry(e string) bool {
	a, _, ok := strings.Cut(e, "/")
	_, err := netip.ParseAddr(a)
	return ok && err == nil
}

// Prefixes are the allowlist's CIDR entries, in order; entries that do not
// parse are left out (Validate reports them).
func (n Network) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, e := range n.Allow {
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// AllowsName reports whether the allowlist names host: an exact entry, or
// a ".domain" entry and host is a name under domain (label-bound:
// "badexample.org" is not under ".example.org"). host is compared without
// case and without one trailing dot.
func (n Network) AllowsName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || checkHost(host) != "" || strings.HasPrefix(host, ".") {
		return false
	}
	for _, e := range n.Names() {
		if e == host || strings.HasPrefix(e, ".") && strings.HasSuffix(host, e) {
			return true
		}
	}
	return false
}

// Validate reports every problem of the network policy, each starting
// with the key it is about ("allow[2]: ...", "hosts.example.com: ...").
func (n Network) Validate() error {
	var errs []error
	for i, e := range n.Allow {
		if why := checkEntry(e); why != "" {
			errs = append(errs, fmt.Errorf("allow[%d]: %s", i, why))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(n.Hosts)) {
		switch a, err := netip.ParseAddr(n.Hosts[name]); {
		case strings.HasPrefix(name, ".") || checkHost(name) != "":
			errs = append(errs, fmt.Errorf("hosts: %q is not a host name", name))
		case !n.AllowsName(name):
			errs = append(errs, fmt.Errorf("hosts.%s: the name is not on the allowlist", name))
		case err != nil || a.Zone() != "":
			errs = append(errs, fmt.Errorf("hosts.%s: %q is not an IP address", name, n.Hosts[name]))
		case neverReached(a):
			errs = append(errs, fmt.Errorf("hosts.%s: %s is a loopback, unspecified or multicast address, which the sandbox never reaches", name, a))
		}
	}
	errs = append(errs, n.ValidateSecrets()...)
	if n.UpstreamCA != "" && len(n.Secrets) == 0 {
		errs = append(errs, errors.New("upstreamCA: only a secret's host is connected to by the proxy, and there are no secrets"))
	}
	return errors.Join(errs...)
}

// neverReached: addresses no allowlist opens, since they are the host
// itself or no host at all.
func neverReached(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// reserved are prefixes an allowlist CIDR may not overlap.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::/96"), // ::, ::1 and the IPv4-compatible addresses
}

// checkEntry says what is wrong with an allowlist entry, or "".
func checkEntry(entry string) string {
	if !isPrefixEntry(entry) {
		return checkHost(entry)
	}
	p, err := netip.ParsePrefix(entry)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a CIDR prefix like 10.20.0.0/16", entry)
	case p.Addr().Zone() != "" || p.Addr().Is4In6():
		return fmt.Sprintf("%q: write IPv4 prefixes in dotted form, without a zone", entry)
	case p != p.Masked():
		return fmt.Sprintf("%q has host bits set; write it as %s", entry, p.Masked())
	}
	for _, r := range reserved {
		if p.Overlaps(r) {
			return fmt.Sprintf("%q covers %s: loopback, unspecified and IPv4-compatible addresses are never reachable", entry, r)
		}
	}
	return ""
}

// checkHost says what is wrong with an allowlist entry, or "". An entry is a
// host name, or a leading dot and a domain for every name under it.
func checkHost(entry string) string {
	const want = "must be a host name like api.example.com, or .example.com for every name under it"
	if strings.HasPrefix(entry, "*.") {
		return fmt.Sprintf("%q: write a suffix as %q", entry, entry[1:])
	}
	name := strings.TrimPrefix(entry, ".")
	if name == "" || len(name) > 253 {
		return fmt.Sprintf("%q %s", entry, want)
	}
	if a, err := netip.ParseAddr(name); err == nil {
		return fmt.Sprintf("%q is an IP address; allow it as a CIDR prefix like %s", entry, netip.PrefixFrom(a, a.BitLen()))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !validLabel(l) {
			return fmt.Sprintf("%q %s", entry, want)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Sprintf("%q %s (a top-level domain is never all digits)", entry, want)
	}
	return ""
}

// validLabel: 1 to 63 letters, digits and inner hyphens.
func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := range len(l) {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
