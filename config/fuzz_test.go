package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

// FuzzParseConfig: Parse never panics; an accepted configuration validates,
// has the demo profile, and resolves a plain job for every profile.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "deploy", "baton.example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	for _, s := range []string{
		"", "{}", "prefix: a\nprefx: b\n", "concurrency: 1.5\n", "leaseTTL: 15\n",
		"profiles:\n  x:\n    command: [a]\n    network: none\n",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [a.example.com, .example.org]}\n",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [10.0.0.1]}\n",
		"profiles:\n  x: &p {command: [a], timeout: 5m}\n  y: *p\n",
		"profiles:\n  x:\n    command: [a]\n    network: &n {allow: [a.com]}\n  y:\n    command: [b]\n    network: *n\n",
		"{\"prefix\": \"j\", \"profiles\": {\"x\": {\"command\": [\"a\"]}}}",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [t.internal, 10.0.0.0/30], hosts: {t.internal: 10.0.0.2}}\n",
		"profiles:\n  x:\n    command: [a]\n    mounts: [/opt, {source: /srv, target: /data, writable: true}]\n",
		"profiles:\n  x:\n    command: [a]\n    limits: {pids: 9, memory: 1GiB, cpus: 0.5, tmp: 8MiB, rlimits: {nofile: 64, as: unlimited}}\n",
		"cgroupParent: /sys/fs/cgroup/x\nprofiles:\n  x:\n    command: [a]\n    agentUID: 7\n",
		"profiles:\n  x:\n    command: [a, -p]\n    allowArgs: [--model *, \"--effort=*\", --debug]\n    limits: {disk: 64MiB}\n",
		"profiles:\n  x:\n    command: [a]\n    allowArgs: yes\n",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [api.example.com]}\n    secrets: {KEY: {value: sk-1, hosts: [api.example.com], header: x-api-key}}\n",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [.example.org]}\n    secrets: {T: {env: HOME, hosts: [git.example.org], header: basic}, U: {file: /nonexistent, hosts: [git.example.org], header: authorization}}\n",
		"profiles:\n  x:\n    command: [a]\n    network: {allow: [a.example.com]}\n    secrets: {K: {value: v, file: /f, hosts: [b.example.com], header: cookie}}\n    pool: 1\n",
		"a: &a [*a]\n", "prefix: a\n---\nprefix: b\n", "- 1\n", "!!binary aGk=",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a configuration that does not validate: %v", err)
		}
		if _, ok := c.Profiles[config.DemoProfile]; !ok {
			t.Fatal("no demo profile")
		}
		for name, p := range c.Profiles {
			inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: name}, "/usr/bin/baton")
			if errors.Is(err, config.ErrSecretUnavailable) {
				continue // a secret's file or variable this machine lacks
			}
			if err != nil {
				t.Fatalf("profile %q does not resolve a plain job: %v", name, err)
			}
			// The agent's environment holds each secret's placeholder,
			// never its value, and the spec's network validates.
			if err := inv.Network.Validate(); err != nil {
				t.Fatalf("profile %q resolves to a network that does not validate: %v", name, err)
			}
			for _, s := range inv.Network.Secrets {
				if !slices.Contains(inv.Env, s.Name+"="+s.Placeholder) {
					t.Fatalf("profile %q: the agent's %s is not its placeholder", name, s.Name)
				}
				if v := p.Secrets[s.Name].Value; v != "" && slices.ContainsFunc(inv.Env, func(kv string) bool { return strings.Contains(kv, v) }) {
					t.Fatalf("profile %q: the agent's environment holds secret %s's value", name, s.Name)
				}
			}
		}
	})
}
