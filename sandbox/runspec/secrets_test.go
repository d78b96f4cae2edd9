package runspec_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

func TestSecretsValidate(t *testing.T) {
	ph := "baton-secret-key-0123456789abcdef"
	ok := runspec.Secret{Name: "API_KEY", Placeholder: ph, Value: "sk-1", Hosts: []string{"api.example.com"}, Header: runspec.HeaderAPIKey}
	with := func(f func(*runspec.Secret)) []runspec.Secret {
		s := ok
		s.Hosts = append([]string(nil), ok.Hosts...)
		f(&s)
		return []runspec.Secret{s}
	}
	for _, tc := range []struct {
		name    string
		secrets []runspec.Secret
		ca      string
		want    string // "" when valid
	}{
		{"valid", []runspec.Secret{ok}, "", ""},
		{"valid with an upstream CA", []runspec.Secret{ok}, "-----BEGIN CERTIFICATE-----", ""},
		{"bad name", with(func(s *runspec.Secret) { s.Name = "1KEY" }), "", `secrets: "1KEY" must match`},
		{"twice", []runspec.Secret{ok, ok}, "", "secrets.API_KEY: named twice"},
		{"short placeholder", with(func(s *runspec.Secret) { s.Placeholder = "short" }), "", "the placeholder must be 24 to 256"},
		{"placeholder with a space", with(func(s *runspec.Secret) { s.Placeholder = ph + " x" }), "", "the placeholder must be"},
		{"empty value", with(func(s *runspec.Secret) { s.Value = "" }), "", "secrets.API_KEY: the value is empty"},
		{"value with a newline", with(func(s *runspec.Secret) { s.Value = "a\r\nX-Evil: 1" }), "", "holds a CR, LF or NUL byte"},
		{"value holding its placeholder", with(func(s *runspec.Secret) { s.Value = "x" + ph }), "", "the value holds the placeholder"},
		{"unknown header", with(func(s *runspec.Secret) { s.Header = "cookie" }), "", `secrets.API_KEY.header: "cookie" must be one of x-api-key, authorization, basic`},
		{"no hosts", with(func(s *runspec.Secret) { s.Hosts = nil }), "", "secrets.API_KEY.hosts: must list the hosts"},
		{"host off the allowlist", with(func(s *runspec.Secret) { s.Hosts = []string{"evil.example.net"} }), "", `secrets.API_KEY.hosts[0]: "evil.example.net" is not on the allowlist`},
		{"suffix host", with(func(s *runspec.Secret) { s.Hosts = []string{".example.org"} }), "", "must be a lower-case host name"},
		{"upper-case host", with(func(s *runspec.Secret) { s.Hosts = []string{"API.example.com"} }), "", "must be a lower-case host name"},
		{"upstream CA without secrets", nil, "x", "upstreamCA: only a secret's host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := runspec.Network{Allow: []string{"api.example.com", ".example.org"}, Secrets: tc.secrets, UpstreamCA: tc.ca}
			err := n.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "sk-1"):
				t.Fatalf("the error holds the value: %v", err)
			}
		})
	}
	// A host under a suffix entry is allowed, and For matches it without
	// case or trailing dot.
	s := with(func(s *runspec.Secret) { s.Hosts = []string{"git.example.org"} })[0]
	if err := (runspec.Network{Allow: []string{".example.org"}, Secrets: []runspec.Secret{s}}).Validate(); err != nil {
		t.Fatal(err)
	}
	if !s.For("GIT.example.org.") || s.For("example.org") || s.For("x.git.example.org") {
		t.Error("For")
	}
}
