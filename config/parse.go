package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// Defaults of the configuration.
const (
	DefaultLeaseTTL       = 15 * time.Second
	DefaultConcurrency    = 4
	DefaultReplicas       = 1
	DefaultEventsMaxAge   = 7 * 24 * time.Hour
	DefaultRunRetention   = 7 * 24 * time.Hour
	DefaultMaxJobBytes    = protocol.DefaultMaxJobBytes
	DefaultSandboxUID     = 65534 // nobody
	DefaultProfileTimeout = time.Hour
	DefaultStreamMaxBytes = 1 << 30 // jobs and DLQ streams
	DefaultStreamMaxMsgs  = 100_000 // jobs and DLQ streams
	DefaultDiskReserve    = 1 << 30 // free space the disk budget leaves
	// DefaultAskTimeout is a profile's askTimeout: below Claude Code's
	// own wait for an answer (about 60 s), after which it gives up on it.
	DefaultAskTimeout = 45 * time.Second
)

// DemoProfile names the built-in profile that runs baton's fake agent.
const DemoProfile = "demo"

// BatonToken in a profile's command stands for the running baton binary.
const BatonToken = "{baton}"

// demoProfile runs the fake agent: its session told once, 25 lines a
// second, the input echoed in its init event.
func demoProfile() Profile {
	return Profile{
		Command:   []string{BatonToken, "fake-agent", "--story", "--rate", "25", "--echo-input"},
		AllowArgs: AnyArgs,
		Timeout:   10 * time.Minute,
		Events:    agui.DialectClaude,
	}
}

// defaults is the configuration before the file and without profiles.
func defaults() *Config {
	return &Config{
		Prefix:        protocol.DefaultPrefix,
		LeaseTTL:      DefaultLeaseTTL,
		Concurrency:   DefaultConcurrency,
		Replicas:      DefaultReplicas,
		EventsMaxAge:  DefaultEventsMaxAge,
		RunRetention:  DefaultRunRetention,
		MaxJobBytes:   DefaultMaxJobBytes,
		SandboxUID:    DefaultSandboxUID,
		JobsMaxBytes:  DefaultStreamMaxBytes,
		JobsMaxMsgs:   DefaultStreamMaxMsgs,
		DLQMaxBytes:   DefaultStreamMaxBytes,
		DLQMaxMsgs:    DefaultStreamMaxMsgs,
		MaxInputBytes: DefaultMaxInputBytes,
		DiskBudget:    true,
		DiskReserve:   DefaultDiskReserve,
	}
}

// Default returns the configuration of a worker started without a file: all
// defaults and the built-in demo profile.
func Default() *Config {
	c := defaults()
	c.Profiles = map[string]Profile{DemoProfile: demoProfile()}
	return c
}

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a configuration from YAML (JSON being YAML too). Keys the
// configuration does not have are errors that name their line. Keys left
// out keep their defaults, and a profile's zero timeout means
// DefaultProfileTimeout; an empty document is all defaults. The built-in
// demo profile is added unless the document defines one named "demo". The
// result is validated; every problem found is in the error.
func Parse(data []byte) (*Config, error) {
	if err := checkInts(data); err != nil {
		return nil, err
	}
	c := defaults()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	switch err := dec.Decode(c); {
	case errors.Is(err, io.EOF):
		// An empty document: all defaults.
	case err != nil:
		return nil, decodeError(err)
	default:
		for { // only empty documents may follow, as a stray "---" makes
			var next yaml.Node
			err := dec.Decode(&next)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, decodeError(err)
			}
			if !emptyDocument(&next) {
				return nil, fmt.Errorf("line %d: a second YAML document; keep the whole configuration in one", max(next.Line, 1))
			}
		}
	}
	pooled, err := poolKeys(data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for name, p := range c.Profiles {
		if p.Timeout == 0 {
			p.Timeout = DefaultProfileTimeout
		}
		if line, ok := pooled[name]; !ok {
			p.Pool = PoolAuto
		} else if p.Pool == PoolAuto {
			// PoolAuto is the key left out, never a value written;
			// Validate reports the other negative ones.
			errs = append(errs, fmt.Errorf("line %d: profiles.%s.pool: %d must be between 0 and %d", line, name, p.Pool, MaxPool))
		}
		c.Profiles[name] = p
	}
	if _, ok := c.Profiles[DemoProfile]; !ok {
		if c.Profiles == nil {
			c.Profiles = map[string]Profile{}
		}
		c.Profiles[DemoProfile] = demoProfile()
	}
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		return nil, err
	}
	return c, nil
}

// poolKeys finds the profiles of the document that set "pool", with the
// line of each key; the others get PoolAuto.
func poolKeys(data []byte) (map[string]int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	keys := map[string]int{}
	if len(doc.Content) == 0 {
		return keys, nil
	}
	profiles := mappingValue(resolveAlias(doc.Content[0]), "profiles")
	if profiles == nil {
		return keys, nil
	}
	for i := 0; i+1 < len(profiles.Content); i += 2 {
		if k := mappingValue(resolveAlias(profiles.Content[i+1]), "pool"); k != nil {
			keys[profiles.Content[i].Value] = k.Line
		}
	}
	return keys, nil
}

// mappingValue is the value of key in mapping n, looking into merged
// mappings ("<<") too, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "<<" {
			continue
		}
		merged := resolveAlias(n.Content[i+1])
		if merged.Kind == yaml.SequenceNode {
			for _, m := range merged.Content {
				if v := mappingValue(resolveAlias(m), key); v != nil {
					return v
				}
			}
			continue
		}
		if v := mappingValue(merged, key); v != nil {
			return v
		}
	}
	return nil
}

func emptyDocument(n *yaml.Node) bool {
	return len(n.Content) == 0 || len(n.Content) == 1 && n.Content[0].ShortTag() == "!!null"
}

var (
	unknownKeyRE = regexp.MustCompile(`^line (\d+): field (.*) not found in type (\S+)$`)
	wrongTypeRE  = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
)

// decodeError rewrites yaml's errors, which speak of Go types, in the terms
// of the file; each problem is one error starting with its line.
func decodeError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err // a syntax error: yaml's message names the line
	}
	errs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := unknownKeyRE.FindStringSubmatch(e); m != nil {
			where, keys := typeKeys(m[3])
			e = fmt.Sprintf("line %s: unknown key %q in %s (known keys: %s)", m[1], m[2], where, keys)
		} else if m := wrongTypeRE.FindStringSubmatch(e); m != nil {
			e = fmt.Sprintf("line %s: want %s, got %s", m[1], typeWant(m[4]), yamlGot(m[2], m[3]))
		}
		errs = append(errs, errors.New(e))
	}
	return errors.Join(errs...)
}

// typeKeys describes a struct of this package and lists its keys.
func typeKeys(goType string) (where, keys string) {
	var t reflect.Type
	switch goType {
	case "config.Config":
		where, t = "the configuration", reflect.TypeFor[Config]()
	case "config.Profile":
		where, t = "a profile", reflect.TypeFor[Profile]()
	case "config.Limits":
		where, t = "limits", reflect.TypeFor[Limits]()
	case "config.Outputs":
		where, t = "outputs", reflect.TypeFor[Outputs]()
	case "config.Secret":
		where, t = "a secret", reflect.TypeFor[Secret]()
	case "config.KeyConcurrency":
		where, t = "keyConcurrency", reflect.TypeFor[KeyConcurrency]()
	case "policy.Policy":
		where, t = "a policy", reflect.TypeFor[policy.Policy]()
	default:
		return goType, "?"
	}
	var names []string
	for f := range t.Fields() {
		if f.Anonymous { // an inline group of keys (Tenancy)
			for g := range f.Type.Fields() {
				names = append(names, strings.Split(g.Tag.Get("yaml"), ",")[0])
			}
			continue
		}
		names = append(names, strings.Split(f.Tag.Get("yaml"), ",")[0])
	}
	return where, strings.Join(names, ", ")
}

func typeWant(goType string) string {
	switch goType {
	case "time.Duration":
		return `a duration with a unit, like "15s" or "1h"`
	case "int":
		return "an integer"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	case "map[string]string":
		return "a mapping of names to strings"
	case "map[string]int":
		return "a mapping of names to integers"
	case "config.KeyConcurrency":
		return "a mapping with default and keys"
	case "map[string]config.Profile":
		return "a mapping of profile names to profiles"
	case "config.Config":
		return "a mapping of configuration keys"
	case "config.Profile":
		return "a profile (a mapping with command, env, ...)"
	case "[]config.Mount":
		return "a list of mounts"
	case "config.Limits":
		return "a mapping of limits (pids, memory, cpus, tmp, rlimits)"
	case "config.Rlimits":
		return "a mapping of rlimit names to values"
	case "float64":
		return "a number"
	case "policy.Policy":
		return "a policy (a mapping with default, allow, ask, deny)"
	case "policy.Verdict":
		return "allow, ask or deny"
	}
	return goType
}

func yamlGot(tag, value string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "str":
		return fmt.Sprintf("%q", value)
	}
	return fmt.Sprintf("%s (%s)", value, tag)
}

// checkInts refuses a fraction where the configuration wants an integer,
// which yaml would silently truncate ("concurrency: 1.5" is not 1).
func checkInts(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil // Parse's decoder reports it
	}
	var errs []error
	var walk func(n *yaml.Node, t reflect.Type)
	walk = func(n *yaml.Node, t reflect.Type) {
		n = resolveAlias(n)
		switch t.Kind() {
		case reflect.Int:
			if f, err := strconv.ParseFloat(n.Value, 64); n.ShortTag() == "!!float" && err == nil && f != math.Trunc(f) {
				errs = append(errs, fmt.Errorf("line %d: want an integer, got %s", n.Line, n.Value))
			}
		case reflect.Map:
			if n.Kind == yaml.MappingNode {
				for i := 1; i < len(n.Content); i += 2 {
					walk(n.Content[i], t.Elem())
				}
			}
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				for f := range t.Fields() {
					if strings.Split(f.Tag.Get("yaml"), ",")[0] == n.Content[i].Value {
						walk(n.Content[i+1], f.Type)
					}
				}
			}
		}
	}
	walk(doc.Content[0], reflect.TypeFor[Config]())
	return errors.Join(errs...)
}
