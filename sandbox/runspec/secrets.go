package runspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Secret is a credential the agent never holds: its environment has Name
// set to Placeholder, and the egress proxy, outside the sandbox, puts
// Value in place of the placeholder in the Header of requests to Hosts,
// over a TLS connection it terminates with the run's own CA.
type Secret struct {
	Name        string   `json:"name"`
	Placeholder string   `json:"placeholder"`
	Value       string   `json:"value"`
	Hosts       []string `json:"hosts"`
	Header      string   `json:"header"`
}

// The headers a secret goes in.
const (
	// HeaderAPIKey: "x-api-key: <value>" (Anthropic's).
	HeaderAPIKey = "x-api-key"
	// HeaderAuthorization: "Authorization: Bearer <value>".
	HeaderAuthorization = "authorization"
	// HeaderBasic: the password of "Authorization: Basic
	// base64(user:password)", as git sends over HTTPS.
	HeaderBasic = "basic"
)

// SecretHeaders are the values Secret.Header takes.
var SecretHeaders = []string{HeaderAPIKey, HeaderAuthorization, HeaderBasic}

// Bounds of a secret.
const (
	// MinPlaceholder keeps a placeholder unguessable and unlikely to
	// occur by chance in what the agent sends.
	MinPlaceholder = 24
	maxPlaceholder = 256
	// MaxSecretValue bounds a value: it goes in a request header.
	MaxSecretValue = 16 << 10
	maxSecrets     = 64
)

// ErrSecretHost: a secret names a host the allowlist does not.
var ErrSecretHost = errors.New("not on the allowlist")

// ValidSecretName reports whether name may name a secret, which is the
// agent's environment variable: [A-Za-z_][A-Za-z0-9_]{0,127}.
func ValidSecretName(name string) bool {
	if name == "" || len(name) > 128 || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validPlaceholder: what may stand in a header, a URL and an environment
// variable unchanged.
func validPlaceholder(p string) bool {
	if len(p) < MinPlaceholder || len(p) > maxPlaceholder {
		return false
	}
	for i := range len(p) {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckSecretValue says what keeps v from going in a header, or "".
func CheckSecretValue(v string) string {
	switch {
	case v == "":
		return "is empty"
	case len(v) > MaxSecretValue:
		return fmt.Sprintf("is %d bytes, more than %d", len(v), MaxSecretValue)
	case strings.ContainsAny(v, "\r\n\x00"):
		return "holds a CR, LF or NUL byte, which cannot go in a header"
	}
	return ""
}

// ValidateSecrets reports every problem of n's secrets, each starting
// with its key ("secrets.GITHUB_TOKEN.hosts[0]: ...").
func (n Network) ValidateSecrets() []error {
	var errs []error
	if len(n.Secrets) > maxSecrets {
		errs = append(errs, fmt.Errorf("secrets: %d secrets, more than %d", len(n.Secrets), maxSecrets))
	}
	names, placeholders := map[string]bool{}, map[string]bool{}
	for _, s := range n.Secrets {
		at := "secrets." + s.Name
		if !ValidSecretName(s.Name) {
			errs = append(errs, fmt.Errorf("secrets: %q must match [A-Za-z_][A-Za-z0-9_]{0,127}, as it names an environment variable", s.Name))
			continue
		}
		if names[s.Name] {
			errs = append(errs, fmt.Errorf("%s: named twice", at))
		}
		names[s.Name] = true
		if !validPlaceholder(s.Placeholder) {
			errs = append(errs, fmt.Errorf("%s: the placeholder must be %d to %d of [A-Za-z0-9_-]", at, MinPlaceholder, maxPlaceholder))
		} else if placeholders[s.Placeholder] {
			errs = append(errs, fmt.Errorf("%s: its placeholder is another secret's", at))
		}
		placeholders[s.Placeholder] = true
		if why := CheckSecretValue(s.Value); why != "" {
			errs = append(errs, fmt.Errorf("%s: the value %s", at, why))
		} else if strings.Contains(s.Value, s.Placeholder) {
			errs = append(errs, fmt.Errorf("%s: the value holds the placeholder", at))
		}
		if !slices.Contains(SecretHeaders, s.Header) {
			errs = append(errs, fmt.Errorf("%s.header: %q must be one of %s", at, s.Header, strings.Join(SecretHeaders, ", ")))
		}
		if len(s.Hosts) == 0 {
			errs = append(errs, fmt.Errorf("%s.hosts: must list the hosts the secret is for", at))
		}
		for i, h := range s.Hosts {
			switch {
			case strings.HasPrefix(h, ".") || checkHost(h) != "" || h != strings.ToLower(h):
				errs = append(errs, fmt.Errorf("%s.hosts[%d]: %q must be a lower-case host name like api.example.com", at, i, h))
			case !n.AllowsName(h):
				errs = append(errs, fmt.Errorf("%s.hosts[%d]: %q is %w", at, i, h, ErrSecretHost))
			}
		}
	}
	return errs
}

// For reports whether s is for host (compared without case and
// without a trailing dot).
func (s Secret) For(host string) bool {
	return slices.Contains(s.Hosts, strings.ToLower(strings.TrimSuffix(host, ".")))
}
