package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

// Secret is a profile's credential that its agents never hold: their
// environment has the secret's name set to a placeholder made for each
// run, and the egress proxy, outside the sandbox, puts the value in place
// of it in Header of requests to Hosts over HTTPS. The value comes from
// exactly one of Value, File (read for each run, so a rotated file
// applies to the next run) or Env (the worker's environment).
type Secret struct {
	Value string `yaml:"value"`
	File  string `yaml:"file"`
	Env   string `yaml:"env"`
	// Hosts are the host names the secret goes to, each on the profile's
	// allowlist.
	Hosts []string `yaml:"hosts"`
	// Header is runspec.HeaderAPIKey ("x-api-key: <value>"),
	// HeaderAuthorization ("Authorization: Bearer <value>") or
	// HeaderBasic (the password of "Authorization: Basic", as git sends).
	Header string `yaml:"header"`
}

// ErrSecretUnavailable: a secret's file or environment variable gave no
// value when a job was resolved.
var ErrSecretUnavailable = errors.New("secret unavailable")

// placeholderBytes are a placeholder's random bytes: 128 bits.
const placeholderBytes = 16

// placeholder is a new placeholder for the secret name: it says what it
// stands for (in a log the agent shows) and cannot be guessed.
func placeholder(name string) string {
	b := make([]byte, placeholderBytes)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return "baton-secret-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")) + "-" + hex.EncodeToString(b)
}

// validateSecrets reports the problems of p's secrets, each with its key
// under at.
func (p Profile) validateSecrets(at string) []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	if len(p.Secrets) > 0 && p.Pool > 0 {
		bad(at+".pool", "a run with secrets has a CA of its own in its sandbox: no pool")
	}
	if p.UpstreamCA != "" && !filepath.IsAbs(p.UpstreamCA) {
		bad(at+".upstreamCA", "%q must be an absolute path", p.UpstreamCA)
	}
	// The rest is runspec's, on a network with stand-in placeholders.
	n := runspec.Network(p.Network)
	n.Secrets = nil
	for _, name := range slices.Sorted(maps.Keys(p.Secrets)) {
		s := p.Secrets[name]
		key := at + ".secrets." + name
		sources := 0
		for _, set := range []bool{s.Value != "", s.File != "", s.Env != ""} {
			if set {
				sources++
			}
		}
		switch {
		case sources != 1:
			bad(key, "needs exactly one of value, file or env")
		case s.File != "" && !filepath.IsAbs(s.File):
			bad(key+".file", "%q must be an absolute path", s.File)
		case s.Env != "" && !runspec.ValidSecretName(s.Env):
			bad(key+".env", "%q is not an environment variable name", s.Env)
		case s.Value != "":
			if why := runspec.CheckSecretValue(s.Value); why != "" {
				bad(key+".value", "%s", why)
			}
		}
		if _, set := p.Env[name]; set {
			bad(key, "the profile's env sets %s too; the secret's placeholder is the agent's %s", name, name)
		}
		if slices.Contains(p.AllowEnv, name) {
			bad(key, "allowEnv lets a job set %s, which is the secret's placeholder", name)
		}
		n.Secrets = append(n.Secrets, runspec.Secret{
			Name: name, Placeholder: placeholder(name), Value: "stand-in", Hosts: s.Hosts, Header: s.Header,
		})
	}
	if len(n.Secrets) > 0 {
		for _, e := range n.ValidateSecrets() {
			errs = append(errs, fmt.Errorf("%s.%w", at, e))
		}
	}
	return errs
}

// resolveSecrets is p's secrets for one run, each with its placeholder
// and its value, sorted by name, and the profile's upstream CA.
func (p Profile) resolveSecrets(profile string) ([]runspec.Secret, string, error) {
	var out []runspec.Secret
	for _, name := range slices.Sorted(maps.Keys(p.Secrets)) {
		s := p.Secrets[name]
		v := s.Value
		switch {
		case s.File != "":
			b, err := os.ReadFile(s.File)
			if err != nil {
				return nil, "", fmt.Errorf("%w: profile %q: secret %s: %v", ErrSecretUnavailable, profile, name, err)
			}
			// A file written by an editor or echo ends with a newline
			// that is not the secret's.
			v = strings.TrimRight(string(b), "\r\n")
		case s.Env != "":
			v = os.Getenv(s.Env)
		}
		if why := runspec.CheckSecretValue(v); why != "" {
			return nil, "", fmt.Errorf("%w: profile %q: secret %s: the value from %s %s", ErrSecretUnavailable, profile, name, secretSource(s), why)
		}
		out = append(out, runspec.Secret{
			Name: name, Placeholder: placeholder(name), Value: v, Hosts: slices.Clone(s.Hosts), Header: s.Header,
		})
	}
	if p.UpstreamCA == "" {
		return out, "", nil
	}
	ca, err := os.ReadFile(p.UpstreamCA)
	if err != nil {
		return nil, "", fmt.Errorf("%w: profile %q: upstreamCA: %v", ErrSecretUnavailable, profile, err)
	}
	return out, string(ca), nil
}

func secretSource(s Secret) string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.Env != "":
		return "env " + s.Env
	}
	return "value"
}
