package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/sandbox/runspec"
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

// Validate reports every problem of the network policy, each starting
// with the key it is about ("allow[2]: ...", "hosts.example.com: ...").
func (n Network) Validate() error { return runspec.Network(n).Validate() }

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
