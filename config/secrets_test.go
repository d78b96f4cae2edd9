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

func TestSecretsValidate(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each in the error; none: valid
	}{
		{"valid", `
    network: {allow: [api.example.com, .example.org]}
    secrets:
      KEY: {value: sk-1, hosts: [api.example.com], header: x-api-key}
      TOKEN: {env: BATON_TOKEN, hosts: [git.example.org], header: basic}
      BEARER: {file: /run/secrets/b, hosts: [api.example.com, git.example.org], header: authorization}
    upstreamCA: /etc/baton/ca.pem`, nil},
		{"no source", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {hosts: [api.example.com], header: x-api-key}}`,
			[]string{"profiles.x.secrets.KEY: needs exactly one of value, file or env"}},
		{"two sources", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: a, env: B, hosts: [api.example.com], header: x-api-key}}`,
			[]string{"profiles.x.secrets.KEY: needs exactly one of value, file or env"}},
		{"relative file, bad env name", `
    network: {allow: [api.example.com]}
    secrets:
      A: {file: key.txt, hosts: [api.example.com], header: x-api-key}
      B: {env: 1X, hosts: [api.example.com], header: x-api-key}`,
			[]string{`profiles.x.secrets.A.file: "key.txt" must be an absolute path`, `profiles.x.secrets.B.env: "1X" is not an environment variable name`}},
		{"value with a newline", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: "a\nb", hosts: [api.example.com], header: x-api-key}}`,
			[]string{"profiles.x.secrets.KEY.value: holds a CR, LF or NUL byte"}},
		{"host off the allowlist, unknown header", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: v, hosts: [evil.example.net], header: cookie}}`,
			[]string{`profiles.x.secrets.KEY.hosts[0]: "evil.example.net" is not on the allowlist`, `profiles.x.secrets.KEY.header: "cookie" must be one of x-api-key, authorization, basic`}},
		{"no hosts", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: v, header: x-api-key}}`,
			[]string{"profiles.x.secrets.KEY.hosts: must list the hosts"}},
		{"bad name", `
    network: {allow: [api.example.com]}
    secrets: {A-B: {value: v, hosts: [api.example.com], header: x-api-key}}`,
			[]string{`profiles.x.secrets: "A-B" must match`}},
		{"env and allowEnv set it", `
    network: {allow: [api.example.com]}
    env: {KEY: x}
    allowEnv: [KEY]
    secrets: {KEY: {value: v, hosts: [api.example.com], header: x-api-key}}`,
			[]string{"the profile's env sets KEY too", "allowEnv lets a job set KEY"}},
		{"pool", `
    pool: 1
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: v, hosts: [api.example.com], header: x-api-key}}`,
			[]string{"profiles.x.pool: a run with secrets has a CA of its own"}},
		{"upstream CA, relative or without secrets", `
    upstreamCA: ca.pem`,
			[]string{`profiles.x.upstreamCA: "ca.pem" must be an absolute path`}},
		{"unknown key", `
    network: {allow: [api.example.com]}
    secrets: {KEY: {value: v, hosts: [api.example.com], header: x-api-key, mask: true}}`,
			[]string{`unknown key "mask" in a secret (known keys: value, file, env, hosts, header)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte("profiles:\n  x:\n    command: [a]" + tc.yaml + "\n"))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sk-1") {
				t.Errorf("the error holds a value: %v", err)
			}
		})
	}
}

func TestSecretsResolve(t *testing.T) {
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "key"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATON_TEST_TOKEN", "tok-from-env")
	c, err := config.Parse([]byte(`profiles:
  x:
    command: [a]
    env: {OTHER: "1"}
    network: {allow: [api.example.com, git.example.org]}
    secrets:
      API_KEY: {file: ` + keyFile + `, hosts: [api.example.com], header: x-api-key}
      GIT_TOKEN: {env: BATON_TEST_TOKEN, hosts: [git.example.org], header: basic}
      INLINE: {value: inline-value, hosts: [api.example.com], header: authorization}
    upstreamCA: ` + caFile + `
`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "x"}, "/usr/bin/baton")
	if err != nil {
		t.Fatal(err)
	}
	n := inv.Network
	if len(n.Secrets) != 3 || n.UpstreamCA != "-----BEGIN CERTIFICATE-----\n" {
		t.Fatalf("network %+v", n)
	}
	want := map[string]string{"API_KEY": "sk-from-file", "GIT_TOKEN": "tok-from-env", "INLINE": "inline-value"}
	for _, s := range n.Secrets {
		if s.Value != want[s.Name] {
			t.Errorf("%s: value %q, want %q", s.Name, s.Value, want[s.Name])
		}
		prefix := "baton-secret-" + strings.ToLower(strings.ReplaceAll(s.Name, "_", "-")) + "-"
		if !strings.HasPrefix(s.Placeholder, prefix) || len(s.Placeholder) != len(prefix)+32 {
			t.Errorf("%s: placeholder %q", s.Name, s.Placeholder)
		}
		if !slices.Contains(inv.Env, s.Name+"="+s.Placeholder) {
			t.Errorf("%s: env %q lacks its placeholder", s.Name, inv.Env)
		}
		for _, kv := range inv.Env {
			if strings.Contains(kv, s.Value) {
				t.Errorf("env %q holds %s's value", kv, s.Name)
			}
		}
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	// Each run has placeholders of its own.
	again, err := c.Resolve(protocol.Job{RunID: "r2", Profile: "x"}, "/usr/bin/baton")
	if err != nil {
		t.Fatal(err)
	}
	if again.Network.Secrets[0].Placeholder == n.Secrets[0].Placeholder {
		t.Error("two runs got the same placeholder")
	}
	// A source that gives nothing: the job is not resolved, and the
	// error says which secret and why.
	t.Setenv("BATON_TEST_TOKEN", "")
	_, err = c.Resolve(protocol.Job{RunID: "r3", Profile: "x"}, "/usr/bin/baton")
	if !errors.Is(err, config.ErrSecretUnavailable) || !strings.Contains(err.Error(), "secret GIT_TOKEN: the value from env BATON_TEST_TOKEN is empty") {
		t.Errorf("empty env: %v", err)
	}
	t.Setenv("BATON_TEST_TOKEN", "x")
	os.Remove(keyFile)
	_, err = c.Resolve(protocol.Job{RunID: "r4", Profile: "x"}, "/usr/bin/baton")
	if !errors.Is(err, config.ErrSecretUnavailable) || !strings.Contains(err.Error(), "secret API_KEY:") {
		t.Errorf("missing file: %v", err)
	}
}
