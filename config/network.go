package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

const networkForms = `network must be "none" or {allow: [host, ...], hosts: {name: address}}`

// UnmarshalYAML accepts `none` or `{allow: [host, ...], hosts: {...}}` and
// nothing else.
func (n *Network) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	switch node.Kind {
	case yaml.ScalarNode:
		if node.ShortTag() == "!!str" && node.Value == "none" {
			*n = Network{}
			return nil
		}
		return nodeErr(node, "%s, not %q", networkForms, node.Value)
	case yaml.MappingNode:
		var out Network
		seen := map[string]bool{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := resolveAlias(node.Content[i]), resolveAlias(node.Content[i+1])
			if k.Value != "allow" && k.Value != "hosts" {
				return nodeErr(k, "unknown key %q in network (known keys: allow, hosts)", k.Value)
			}
			if seen[k.Value] {
				return nodeErr(k, "network has the key %q twice", k.Value)
			}
			seen[k.Value] = true
			if v.ShortTag() == "!!null" {
				continue
			}
			var err error
			if k.Value == "allow" {
				out.Allow, err = decodeAllow(v)
			} else {
				out.Hosts, err = decodeHosts(v)
			}
			if err != nil {
				return err
			}
		}
		*n = out
		return nil
	}
	return nodeErr(node, "%s", networkForms)
}

func decodeAllow(v *yaml.Node) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, nodeErr(v, "network.allow must be a list of host names or CIDR prefixes")
	}
	var out []string
	for _, h := range v.Content {
		h = resolveAlias(h)
		if h.Kind != yaml.ScalarNode || h.ShortTag() != "!!str" {
			return nil, nodeErr(h, "network.allow must be a list of host names or CIDR prefixes")
		}
		out = append(out, strings.ToLower(h.Value))
	}
	return out, nil
}

func decodeHosts(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, nodeErr(v, "network.hosts must map host names to addresses")
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, a := resolveAlias(v.Content[i]), resolveAlias(v.Content[i+1])
		if k.Kind != yaml.ScalarNode || a.Kind != yaml.ScalarNode || a.ShortTag() == "!!null" {
			return nil, nodeErr(k, "network.hosts must map host names to addresses")
		}
		name := strings.ToLower(k.Value)
		if _, dup := out[name]; dup {
			return nil, nodeErr(k, "network.hosts names %q twice", name)
		}
		out[name] = a.Value
	}
	return out, nil
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
	for _, name := range sortedKeys(n.Hosts) {
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

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// nodeErr is a TypeError so yaml collects it with the file's other problems.
func nodeErr(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
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
