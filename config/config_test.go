package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

func TestDefault(t *testing.T) {
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := &config.Config{
		Prefix:       "baton",
		LeaseTTL:     15 * time.Second,
		Concurrency:  4,
		Replicas:     1,
		EventsMaxAge: 168 * time.Hour,
		RunRetention: 168 * time.Hour,
		MaxJobBytes:  1 << 20,
		SandboxUID:   65534,
		JobsMaxBytes: 1 << 30, JobsMaxMsgs: 100_000, DLQMaxBytes: 1 << 30, DLQMaxMsgs: 100_000,
		MaxInputBytes: 64 << 10,
		DiskBudget:    true, DiskReserve: 1 << 30,
		Profiles: map[string]config.Profile{"demo": {
			Command:   []string{"{baton}", "fake-agent", "--story", "--rate", "25", "--echo-input"},
			AllowArgs: config.AnyArgs,
			Timeout:   10 * time.Minute,
			Events:    agui.DialectClaude,
		}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Default() = %+v\nwant %+v", c, want)
	}
	if got := c.Limits(); got != (protocol.Limits{MaxBytes: 1 << 20}) {
		t.Fatalf("Limits() = %+v", got)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, doc := range []string{"", "\n", "# only a comment\n", "---\n", "{}", "null", "profiles: {}", "---\n---\n", "{}\n---\n# stray\n"} {
		c, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if !reflect.DeepEqual(c, config.Default()) {
			t.Fatalf("%q parsed to %+v, want the defaults", doc, c)
		}
	}
}

func TestParse(t *testing.T) {
	c, err := config.Parse([]byte(`
prefix: team-a
leaseTTL: 30s
concurrency: 16
replicas: 3
eventsMaxAge: 24h
runRetention: 72h
maxJobBytes: 4194304
sandboxUID: 1500
eventsMaxBytes: 10GiB
jobsMaxBytes: 0
jobsMaxMsgs: 5000
dlqMaxBytes: 64MiB
dlqMaxMsgs: 0
profiles:
  claude:
    command: [claude, -p]
    env: {TOKEN: "x", N: 1}
    allowEnv: [MODEL]
    allowArgs: yes
    network:
      allow: [API.Anthropic.com, .Example.ORG]
  bare:
    command: [sh, -c, "cat"]
    timeout: 0s
    network: none
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Prefix: "team-a", LeaseTTL: 30 * time.Second, Concurrency: 16, Replicas: 3,
		EventsMaxAge: 24 * time.Hour, RunRetention: 72 * time.Hour, MaxJobBytes: 4 << 20, SandboxUID: 1500,
		EventsMaxBytes: 10 << 30, JobsMaxMsgs: 5000, DLQMaxBytes: 64 << 20,
		MaxInputBytes: config.DefaultMaxInputBytes,
		DiskBudget:    true, DiskReserve: config.DefaultDiskReserve,
		Profiles: map[string]config.Profile{
			"claude": {
				Command:   []string{"claude", "-p"},
				Env:       map[string]string{"TOKEN": "x", "N": "1"},
				AllowEnv:  []string{"MODEL"},
				AllowArgs: config.AnyArgs,
				Timeout:   time.Hour,
				Network:   config.Network{Allow: []string{"api.anthropic.com", ".example.org"}},
				Pool:      config.PoolAuto, // the key left out
			},
			"bare": {Command: []string{"sh", "-c", "cat"}, Timeout: time.Hour, Pool: config.PoolAuto},
			"demo": config.Default().Profiles["demo"],
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
}

func TestParseJSON(t *testing.T) {
	// As json.MarshalIndent writes it: tabs and all.
	c, err := config.Parse([]byte("{\n\t\"prefix\": \"j\",\n\t\"leaseTTL\": \"5s\",\n\t\"profiles\": {\n\t\t\"x\": {\"command\": [\"a\"], \"network\": {\"allow\": [\"h.example.com\"]}}\n\t}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Prefix != "j" || c.LeaseTTL != 5*time.Second || c.Profiles["x"].Network.Allow[0] != "h.example.com" {
		t.Fatalf("got %+v", c)
	}
}

func TestParseOwnDemo(t *testing.T) {
	c, err := config.Parse([]byte("profiles:\n  demo:\n    command: [echo, hi]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Profiles["demo"].Command; !reflect.DeepEqual(got, []string{"echo", "hi"}) {
		t.Fatalf("demo command = %q; the file's demo must replace the built-in", got)
	}
}

func TestExampleConfigParses(t *testing.T) {
	path := filepath.Join("..", "deploy", "baton.example.yaml")
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude", "codex", "lint", "demo"} {
		if _, ok := c.Profiles[name]; !ok {
			t.Errorf("example lacks profile %q", name)
		}
	}
	claude := c.Profiles["claude"]
	if claude.Timeout != 30*time.Minute || !reflect.DeepEqual(claude.Network.Allow, []string{"api.anthropic.com"}) {
		t.Errorf("claude profile = %+v", claude)
	}
	// Every key of the configuration is documented in the example.
	data, _ := os.ReadFile(path)
	for _, key := range yamlKeys(reflect.TypeFor[config.Config]()) {
		if !strings.Contains(string(data), "\n"+key+":") {
			t.Errorf("example does not set top-level key %q", key)
		}
	}
	for _, key := range yamlKeys(reflect.TypeFor[config.Profile]()) {
		if !strings.Contains(string(data), "    "+key+":") {
			t.Errorf("example does not show profile key %q", key)
		}
	}
}

func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if f.Anonymous { // an inline group of keys
			keys = append(keys, yamlKeys(f.Type)...)
			continue
		}
		keys = append(keys, strings.Split(f.Tag.Get("yaml"), ",")[0])
	}
	return keys
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("prefix: ok\nconcurency: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), "config "+path+": line 2: unknown key \"concurency\"") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string // every one must be in the error
	}{
		{"unknown top key", "prefix: a\nprefx: b\n",
			[]string{`line 2: unknown key "prefx" in the configuration (known keys: prefix, leaseTTL, concurrency, replicas, eventsMaxAge, outputsMaxAge, workspacesMaxAge, maxWorkspaceBytes, maxWorkspaceEntries, workspacesMaxBytes, runRetention, recordRetention, maxJobBytes, sandboxUID, cgroupParent, eventsMaxBytes, jobsMaxBytes, jobsMaxMsgs, dlqMaxBytes, dlqMaxMsgs, maxInputBytes, diskBudget, diskReserve, sessionsMaxAge, checkpointsMaxBytes, tenantLabel, keyConcurrency, keyWeights, profiles)`}},
		{"unknown profile key", "profiles:\n  x:\n    command: [a]\n    comand: [b]\n",
			[]string{`line 4: unknown key "comand" in a profile (known keys: command, env, allowEnv, allowArgs, maxConcurrent, pool, timeout, network, secrets, upstreamCA, mounts, limits, outputs, agentUID, agentGID, stdin, interrupt, turnEnd, idleTimeout, nice, session, setup, events, tools, toolLimits, policy, askTimeout)`}},
		{"every problem", "concurrency: four\nfoo: 1\nprofiles:\n  x:\n    timeout: soon\n",
			[]string{`line 1: want an integer, got "four"`, `line 2: unknown key "foo"`, `line 5: want a duration with a unit, like "15s" or "1h", got "soon"`}},
		{"duration without unit", "leaseTTL: 15\n", []string{`line 1: want a duration with a unit, like "15s" or "1h", got 15 (int)`}},
		{"duration in words", "leaseTTL: 15 seconds\n", []string{`line 1: want a duration`, `got "15 seconds"`}},
		{"duration in days", "eventsMaxAge: 7d\n", []string{`line 1: want a duration`, `"7d"`}},
		{"float concurrency", "concurrency: 1.5\n", []string{`line 1: want an integer, got 1.5`}},
		{"bool", "profiles:\n  x:\n    command: [a]\n    allowArgs: maybe\n", []string{`line 4: allowArgs must be true, false or a list of flags like [--verbose, --model *, --effort=*], not "maybe"`}},
		{"command string", "profiles:\n  x:\n    command: claude -p\n", []string{`line 3: want a list of strings, got "claude -p"`}},
		{"env list", "profiles:\n  x:\n    command: [a]\n    env: [A=1]\n", []string{`line 4: want a mapping of names to strings, got a list`}},
		{"profiles list", "profiles: [a, b]\n", []string{`line 1: want a mapping of profile names to profiles, got a list`}},
		{"top-level list", "- prefix: a\n", []string{`line 1: want a mapping of configuration keys, got a list`}},
		{"top-level scalar", "hello\n", []string{`line 1: want a mapping of configuration keys, got "hello"`}},
		{"syntax", "prefix: [a\n", []string{`yaml: line`}},
		{"tab indentation", "profiles:\n\tx: 1\n", []string{`yaml: line 2`}},
		{"duplicate key", "prefix: a\nprefix: b\n", []string{`line 2: mapping key "prefix" already defined at line 1`}},
		{"duplicate profile", "profiles:\n  x: {command: [a]}\n  x: {command: [b]}\n", []string{`line 3: mapping key "x" already defined at line 2`}},
		{"two documents", "prefix: a\n---\nprefix: b\n", []string{`line 2: a second YAML document`}},
		{"bad second document", "prefix: a\n---\n[\n", []string{`yaml: line`}},
		{"network word", "profiles:\n  x:\n    command: [a]\n    network: all\n", []string{`line 4: network must be "none" or {allow: [host, ...], hosts: {name: address}}, not "all"`}},
		{"network None", "profiles:\n  x:\n    command: [a]\n    network: None\n", []string{`not "None"`}},
		{"network list", "profiles:\n  x:\n    command: [a]\n    network: [a.com]\n", []string{`line 4: network must be "none" or {allow: [host, ...], hosts: {name: address}}`}},
		{"network allow scalar", "profiles:\n  x:\n    command: [a]\n    network: {allow: a.com}\n", []string{`line 4: network.allow must be a list of host names`}},
		{"network allow nested", "profiles:\n  x:\n    command: [a]\n    network:\n      allow:\n        - {a: b}\n", []string{`line 6: network.allow must be a list of host names`}},
		{"network unknown key", "profiles:\n  x:\n    command: [a]\n    network:\n      deny: [a.com]\n", []string{`line 5: unknown key "deny" in network (known keys: allow, hosts)`}},
		{"network allow twice", "profiles:\n  x:\n    command: [a]\n    network: {allow: [a.com], allow: [b.com]}\n", []string{`network has the key "allow" twice`}},
		{"host with space", "profiles:\n  x:\n    command: [a]\n    network: {allow: [ok.com, foo bar]}\n",
			[]string{`profiles.x.network.allow[1]: "foo bar" must be a host name like api.example.com, or .example.com for every name under it`}},
		{"host wildcard", "profiles:\n  x:\n    command: [a]\n    network: {allow: ['*.example.com']}\n", []string{`profiles.x.network.allow[0]: "*.example.com": write a suffix as ".example.com"`}},
		{"host IP", "profiles:\n  x:\n    command: [a]\n    network: {allow: [10.0.0.1]}\n", []string{`"10.0.0.1" is an IP address`}},
		{"host IPv6", "profiles:\n  x:\n    command: [a]\n    network: {allow: ['::1']}\n", []string{`"::1" is an IP address`}},
		{"host URL", "profiles:\n  x:\n    command: [a]\n    network: {allow: ['https://a.com/']}\n", []string{`allow[0]: "https://a.com/" must be a host name`}},
		{"host trailing dot", "profiles:\n  x:\n    command: [a]\n    network: {allow: [a.com.]}\n", []string{`allow[0]: "a.com." must be a host name`}},
		{"host numeric TLD", "profiles:\n  x:\n    command: [a]\n    network: {allow: [a.123]}\n", []string{`all digits`}},
		{"host bare dot", "profiles:\n  x:\n    command: [a]\n    network: {allow: ['.']}\n", []string{`allow[0]: "." must be a host name`}},
		{"empty command", "profiles:\n  x:\n    command: []\n", []string{`profiles.x.command: must not be empty`}},
		{"no command", "profiles:\n  x:\n    allowArgs: true\n", []string{`profiles.x.command: must not be empty`}},
		{"null profile", "profiles:\n  x:\n", []string{`profiles.x.command: must not be empty`}},
		{"empty program", "profiles:\n  x:\n    command: ['', a]\n", []string{`profiles.x.command[0]: the program must not be empty`}},
		{"NUL in command", "profiles:\n  x:\n    command: [a, \"b\\0c\"]\n", []string{`profiles.x.command[1]: must not contain NUL bytes`}},
		{"env key", "profiles:\n  x:\n    command: [a]\n    env: {A-B: x}\n", []string{`profiles.x.env: key "A-B" must match [A-Za-z_][A-Za-z0-9_]{0,127}`}},
		{"env NUL", "profiles:\n  x:\n    command: [a]\n    env: {A: \"x\\0\"}\n", []string{`profiles.x.env.A: must not contain NUL bytes`}},
		{"allowEnv key", "profiles:\n  x:\n    command: [a]\n    allowEnv: [OK, 1X]\n", []string{`profiles.x.allowEnv[1]: "1X" must match`}},
		{"negative timeout", "profiles:\n  x:\n    command: [a]\n    timeout: -1h\n", []string{`profiles.x.timeout: -1h0m0s must not be negative`}},
		{"negative maxConcurrent", "profiles:\n  x:\n    command: [a]\n    maxConcurrent: -1\n", []string{`profiles.x.maxConcurrent: -1 must not be negative`}},
		{"negative pool", "profiles:\n  x:\n    command: [a]\n    pool: -1\n", []string{`profiles.x.pool: -1 must be between 0 and 64`}},
		{"pool too large", "profiles:\n  x:\n    command: [a]\n    pool: 65\n", []string{`profiles.x.pool: 65 must be between 0 and 64`}},
		{"pool with CIDR entries", "profiles:\n  x:\n    command: [a]\n    pool: 2\n    network: {allow: [10.0.0.0/8]}\n",
			[]string{`profiles.x.pool: a network with CIDR entries is set up per run, after the sandbox: no pool`}},
		{"profile name", "profiles:\n  a b:\n    command: [a]\n", []string{`profiles["a b"]: the name must match [A-Za-z0-9_.-]{1,64}`}},
		{"prefix", "prefix: a.b\n", []string{`prefix: "a.b" must match [A-Za-z0-9_-]{1,64}`}},
		{"empty prefix", "prefix: ''\n", []string{`prefix: "" must match`}},
		{"concurrency zero", "concurrency: 0\n", []string{`concurrency: 0 is out of range 1..10000`}},
		{"concurrency high", "concurrency: 10001\n", []string{`concurrency: 10001 is out of range 1..10000`}},
		{"replicas", "replicas: 7\n", []string{`replicas: 7 is out of range 1..5`}},
		{"lease TTL", "leaseTTL: 500ms\n", []string{`leaseTTL: 500ms is too short; it must be at least 1s`}},
		{"events age", "eventsMaxAge: 30s\n", []string{`eventsMaxAge: 30s is too short; it must be at least 1m0s`}},
		{"jobs count", "jobsMaxMsgs: -5\n", []string{`jobsMaxMsgs: -5 is out of range (0 for no bound)`}},
		{"events bytes", "eventsMaxBytes: 10GB\n", []string{`"10GB" is not a size`}},
		{"run retention", "runRetention: 59s\n", []string{`runRetention: 59s is too short; it must be at least 1m0s`}},
		{"max job bytes", "maxJobBytes: 10\n", []string{`maxJobBytes: 10 is out of range 1024..67108864`}},
		{"max input bytes", "maxInputBytes: 1MiB\n", []string{`maxInputBytes: 1048576 is out of range 1..262144`}},
		{"stdin mode", "profiles:\n  x:\n    command: [a]\n    stdin: pipe\n", []string{`profiles.x.stdin: "pipe" must be once or stream`}},
		{"events dialect", "profiles:\n  x:\n    command: [a]\n    events: gemini\n", []string{`profiles.x.events: unknown dialect "gemini" (one of claude, codex-exec, codex-app-server, raw)`}},
		{"interrupt form", "profiles:\n  x:\n    command: [a]\n    interrupt: sigint\n", []string{"interrupt is `signal` or {line: '<a line>'}, not \"sigint\""}},
		{"interrupt keys", "profiles:\n  x:\n    command: [a]\n    stdin: stream\n    interrupt: {text: x}\n", []string{"the mapping has exactly the key line"}},
		{"interrupt line needs stream", "profiles:\n  x:\n    command: [a]\n    interrupt: {line: x}\n", []string{`profiles.x.interrupt: an interrupt line is written to stdin, which needs stdin: stream`}},
		{"interrupt two lines", "profiles:\n  x:\n    command: [a]\n    stdin: stream\n    interrupt: {line: \"a\\nb\"}\n", []string{`the line must be one line`}},
		{"turnEnd half", "profiles:\n  x:\n    command: [a]\n    turnEnd: {field: type}\n", []string{`profiles.x.turnEnd: needs both field and equals`}},
		{"turnEnd once", "profiles:\n  x:\n    command: [a]\n    turnEnd: {field: type, equals: result}\n", []string{`profiles.x.turnEnd: needs stdin: stream`}},
		{"nice range", "profiles:\n  x:\n    command: [a]\n    nice: 20\n", []string{`profiles.x.nice: 20 is not a nice value (-20 to 19)`}},
		{"nice below", "profiles:\n  x:\n    command: [a]\n    nice: -21\n", []string{`profiles.x.nice: -21 is not a nice value`}},
		{"idleTimeout alone", "profiles:\n  x:\n    command: [a]\n    idleTimeout: 5m\n", []string{`profiles.x.idleTimeout: needs turnEnd`}},
		{"policy bad rule", "profiles:\n  claude:\n    command: [a]\n    stdin: stream\n    policy: {allow: [Read], deny: [Read, \"Bash(curl *\"]}\n",
			[]string{`profiles.claude.policy: bad policy rule: deny[1] "Bash(curl *": the pattern must end with )`}},
		{"policy bad default", "profiles:\n  claude:\n    command: [a]\n    stdin: stream\n    policy: {default: never}\n",
			[]string{`profiles.claude.policy: bad policy rule: default "never" must be allow, ask or deny`}},
		{"policy needs stream", "profiles:\n  claude:\n    command: [a]\n    policy: {default: ask}\n",
			[]string{`profiles.claude.policy: needs stdin: stream`}},
		{"policy unknown key", "profiles:\n  claude:\n    command: [a]\n    stdin: stream\n    policy: {commands: {allow: [ls]}}\n",
			[]string{`line 5: unknown key "commands" in a policy (known keys: default, allow, ask, deny)`}},
		{"policy list", "profiles:\n  claude:\n    command: [a]\n    stdin: stream\n    policy: [Read]\n",
			[]string{`line 5: want a policy (a mapping with default, allow, ask, deny), got a list`}},
		{"policy default list", "profiles:\n  claude:\n    command: [a]\n    stdin: stream\n    policy: {default: [ask]}\n",
			[]string{`line 5: want allow, ask or deny, got a list`}},
		{"askTimeout alone", "profiles:\n  x:\n    command: [a]\n    askTimeout: 30s\n", []string{`profiles.x.askTimeout: needs policy`}},
		{"askTimeout negative", "profiles:\n  x:\n    command: [a]\n    stdin: stream\n    policy: {}\n    askTimeout: -1s\n", []string{`profiles.x.askTimeout: -1s must not be negative`}},
		{"root sandbox", "sandboxUID: 0\n", []string{`sandboxUID: 0 would run agents as root`}},
		{"uid range", "sandboxUID: 4294967295\n", []string{`sandboxUID: 4294967295 is not a uid`}},
		{"validation lists all", "concurrency: 0\nreplicas: 9\nprofiles:\n  x:\n    command: []\n",
			[]string{"concurrency: 0", "replicas: 9", "profiles.x.command: must not be empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s\nas %+v", tc.doc, c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestValidateProgrammatic(t *testing.T) {
	c := &config.Config{Profiles: map[string]config.Profile{}}
	err := c.Validate()
	if err == nil {
		t.Fatal("zero config validated")
	}
	// One line per problem, each naming its key.
	lines := strings.Split(err.Error(), "\n")
	want := []string{"prefix:", "leaseTTL:", "concurrency:", "replicas:", "eventsMaxAge:", "runRetention:", "maxJobBytes:", "maxInputBytes:", "sandboxUID:", "profiles:"}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// TestParsePoolAuto: a profile that leaves "pool" out gets the adaptive
// pool; "pool: 0" turns it off, "pool: N" is N, and a key merged from an
// anchor counts as written.
func TestParsePoolAuto(t *testing.T) {
	c, err := config.Parse([]byte(`
profiles:
  base: &base {command: [a], pool: 3}
  unset: {command: [a]}
  off: {command: [a], pool: 0}
  two: {command: [a], pool: 2}
  merged: {<<: *base}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"unset": config.PoolAuto, "off": 0, "two": 2, "merged": 3, "demo": 0, "base": 3}
	for name, pool := range want {
		if got := c.Profiles[name].Pool; got != pool {
			t.Errorf("profile %s: pool %d, want %d", name, got, pool)
		}
	}
}
