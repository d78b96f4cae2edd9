package config

import (
	"fmt"
	"net"
	"strings"

	"go.yaml.in/yaml/v3"
)

const networkForms = `network must be "none" or {allow: [host, ...]}`

// UnmarshalYAML accepts `none` or `{allow: [host, ...]}` and nothing else.
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
		seen := false
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := resolveAlias(node.Content[i]), resolveAlias(node.Content[i+1])
			if k.Value != "allow" {
				return nodeErr(k, "unknown key %q in network (known keys: allow)", k.Value)
			}
			if seen {
				return nodeErr(k, "network has the key \"allow\" twice")
			}
			seen = true
			if v.ShortTag() == "!!null" {
				continue
			}
			if v.Kind != yaml.SequenceNode {
				return nodeErr(v, "network.allow must be a list of host names")
			}
			for _, h := range v.Content {
				h = resolveAlias(h)
				if h.Kind != yaml.ScalarNode || h.ShortTag() != "!!str" {
					return nodeErr(h, "network.allow must be a list of host names")
				}
				out.Allow = append(out.Allow, strings.ToLower(h.Value))
			}
		}
		*n = out
		return nil
	}
	return nodeErr(node, "%s", networkForms)
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
	if net.ParseIP(name) != nil {
		return fmt.Sprintf("%q is an IP address; the allowlist holds host names", entry)
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
