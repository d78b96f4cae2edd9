package config_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(`
profiles:
  agent:
    command: ["{baton}", "runner", "--self={baton}", "agent"]
    env: {LANG: en_US.UTF-8, TOKEN: secret, MODEL: default}
    allowEnv: [MODEL, DEBUG]
    allowArgs: true
    timeout: 1h
    network: {allow: [api.example.com]}
  locked:
    command: [claude, -p]
    timeout: 30m
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResolve(t *testing.T) {
	c := testConfig(t)
	job := protocol.Job{
		RunID:   "r1",
		Profile: "agent",
		Input:   "hello",
		Args:    []string{"--x", "{baton}"},
		Env:     map[string]string{"MODEL": "opus", "DEBUG": "1"},
		Timeout: protocol.Duration(10 * time.Minute),
		Files:   map[string]string{"a.txt": "A"},
	}
	inv, err := c.Resolve(job, "/usr/local/bin/baton")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Invocation{
		Profile: "agent",
		// {baton} is replaced in the profile's command, never in job args.
		Argv: []string{"/usr/local/bin/baton", "runner", "--self=/usr/local/bin/baton", "agent", "--x", "{baton}"},
		// Sorted by key; the profile overrides the base (LANG), the job the profile (MODEL).
		Env:     []string{"DEBUG=1", "LANG=en_US.UTF-8", "MODEL=opus", "PATH=/usr/local/bin:/usr/bin:/bin", "TOKEN=secret"},
		Input:   []byte("hello"),
		Files:   map[string]string{"a.txt": "A"},
		Timeout: 10 * time.Minute,
		Network: runspec.Network{Allow: []string{"api.example.com"}},
		Limits:  runspec.Limits{Output: uint64(config.DefaultOutputLimit)},
		Stdin:   config.StdinOnce,
	}
	if !reflect.DeepEqual(inv, want) {
		t.Fatalf("got  %+v\nwant %+v", inv, want)
	}
	// The invocation shares nothing the caller could mutate into the config.
	inv.Network.Allow[0] = "evil.example.com"
	inv.Files["b"] = "B"
	if c.Profiles["agent"].Network.Allow[0] != "api.example.com" || len(job.Files) != 1 {
		t.Fatal("Resolve returned slices or maps shared with its inputs")
	}
}

func TestResolveDefaults(t *testing.T) {
	c := config.Default()
	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "demo"}, "/b")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/b", "fake-agent", "--story", "--rate", "25", "--echo-input"}; !reflect.DeepEqual(inv.Argv, want) {
		t.Errorf("argv = %q, want %q", inv.Argv, want)
	}
	if want := []string{"LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"}; !reflect.DeepEqual(inv.Env, want) {
		t.Errorf("env = %q, want %q", inv.Env, want)
	}
	if inv.Timeout != 10*time.Minute || len(inv.Network.Allow) != 0 {
		t.Errorf("timeout %s, network %+v", inv.Timeout, inv.Network)
	}

	// A profile built in code with no timeout gets the default.
	c.Profiles["bare"] = config.Profile{Command: []string{"x"}}
	inv, err = c.Resolve(protocol.Job{RunID: "r", Profile: "bare"}, "/b")
	if err != nil || inv.Timeout != config.DefaultProfileTimeout {
		t.Fatalf("timeout %s, %v", inv.Timeout, err)
	}
}

func TestResolveTimeout(t *testing.T) {
	c := testConfig(t)
	for _, tc := range []struct {
		job  time.Duration
		want time.Duration
	}{
		{0, time.Hour},
		{time.Second, time.Second},
		{time.Hour, time.Hour},
	} {
		inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "agent", Timeout: protocol.Duration(tc.job)}, "/b")
		if err != nil || inv.Timeout != tc.want {
			t.Errorf("job timeout %s: got %s, %v; want %s", tc.job, inv.Timeout, err, tc.want)
		}
	}
}

// TestResolveOutputLimit: a profile's output limit, 1 GiB by default,
// which a job may lower but not raise.
func TestResolveOutputLimit(t *testing.T) {
	c := testConfig(t)
	c.Profiles["small"] = config.Profile{Command: []string{"x"}, Limits: config.Limits{Output: 1 << 20}}
	for _, tc := range []struct {
		profile, job string
		want         config.ByteSize
	}{
		{"agent", "", config.DefaultOutputLimit},
		{"agent", "64KiB", 64 << 10},
		{"small", "", 1 << 20},
		{"small", "1MiB", 1 << 20},
		{"small", "4096", 4096},
	} {
		job := protocol.Job{RunID: "r", Profile: tc.profile}
		if tc.job != "" {
			job.Limits = map[string]string{protocol.JobLimitOutput: tc.job}
		}
		inv, err := c.Resolve(job, "/b")
		if err != nil || inv.Limits.Output != uint64(tc.want) {
			t.Errorf("profile %s, job output %q: got %d, %v; want %d", tc.profile, tc.job, inv.Limits.Output, err, tc.want)
		}
	}
	_, err := c.Resolve(protocol.Job{RunID: "r", Profile: "small", Limits: map[string]string{"output": "2MiB"}}, "/b")
	if !errors.Is(err, protocol.ErrNotAllowed) || !strings.Contains(err.Error(), `output limit 2097152 bytes exceeds profile "small" limit of 1048576 bytes`) {
		t.Fatalf("a job raising the output limit: %v", err)
	}
}

func TestResolveRejects(t *testing.T) {
	c := testConfig(t)
	cases := []struct {
		name string
		job  protocol.Job
		want error
		msg  string
	}{
		{"unknown profile", protocol.Job{RunID: "r", Profile: "x"}, protocol.ErrUnknownProfile,
			`unknown profile "x" (known: agent, demo, locked)`},
		{"args", protocol.Job{RunID: "r", Profile: "locked", Args: []string{"--dangerously-skip-permissions"}}, protocol.ErrNotAllowed,
			`profile "locked": args not allowed: the profile does not set allowArgs`},
		{"env key", protocol.Job{RunID: "r", Profile: "agent", Env: map[string]string{"MODEL": "x", "TOKEN": "mine"}}, protocol.ErrNotAllowed,
			`env key "TOKEN" not allowed: profile "agent" allows MODEL, DEBUG`},
		{"env when none allowed", protocol.Job{RunID: "r", Profile: "locked", Env: map[string]string{"A": "1"}}, protocol.ErrNotAllowed,
			`env key "A" not allowed: profile "locked" allows no env keys`},
		{"env PATH", protocol.Job{RunID: "r", Profile: "agent", Env: map[string]string{"PATH": "/tmp"}}, protocol.ErrNotAllowed,
			`env key "PATH" not allowed`},
		{"timeout", protocol.Job{RunID: "r", Profile: "locked", Timeout: protocol.Duration(2 * time.Hour)}, protocol.ErrNotAllowed,
			`timeout 2h0m0s exceeds profile "locked" limit of 30m0s`},
		{"disk above the profile's", protocol.Job{RunID: "r", Profile: "locked", Limits: map[string]string{"disk": "4294967297B"}}, protocol.ErrNotAllowed,
			`disk 4294967297 exceeds profile "locked" limit of 4294967296 bytes`},
		{"disk too small", protocol.Job{RunID: "r", Profile: "locked", Limits: map[string]string{"disk": "1MiB"}}, protocol.ErrNotAllowed,
			`disk 1048576 is below the smallest workspace`},
		{"timeout by a nanosecond", protocol.Job{RunID: "r", Profile: "agent", Timeout: protocol.Duration(time.Hour + 1)}, protocol.ErrNotAllowed,
			`timeout 1h0m0.000000001s exceeds profile "agent" limit of 1h0m0s`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Resolve(tc.job, "/b")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("message %q, want %q", err, tc.msg)
			}
			if protocol.ReasonOf(err) == protocol.ReasonInvalid {
				t.Fatalf("ReasonOf(%v) fell through to %q", err, protocol.ReasonInvalid)
			}
		})
	}
}

// TestResolvePolicy: the run's policy is the profile's narrowed by the
// job's, with the profile's askTimeout (45 s unless set); a job's policy
// on a profile without one is refused.
func TestResolvePolicy(t *testing.T) {
	c, err := config.Parse([]byte(`
profiles:
  claude:
    command: [claude, -p, --permission-prompt-tool, stdio]
    stdin: stream
    policy:
      default: ask
      allow: [Read, Grep, "Bash(git status*)"]
      ask: ["Bash(git push*)"]
      deny: ["Bash(curl *)"]
  patient:
    command: [codex, app-server]
    stdin: stream
    policy: {default: deny, allow: [Read]}
    askTimeout: 2m
  plain:
    command: [claude, -p]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		job        protocol.Job
		want       *policy.Policy
		askTimeout time.Duration
		err        string
	}{
		{"the profile's", protocol.Job{RunID: "r", Profile: "claude"},
			&policy.Policy{Default: policy.Ask, Allow: []string{"Read", "Grep", "Bash(git status*)"}, Ask: []string{"Bash(git push*)"}, Deny: []string{"Bash(curl *)"}},
			config.DefaultAskTimeout, ""},
		{"narrowed by the job's", protocol.Job{RunID: "r", Profile: "claude", Policy: &policy.Policy{Default: policy.Allow, Allow: []string{"Bash(git push*)"}, Deny: []string{"Grep"}}},
			&policy.Policy{Default: policy.Ask, Allow: []string{"Read", "Bash(git status*)"}, Ask: []string{"Bash(git push*)"}, Deny: []string{"Bash(curl *)", "Grep"}},
			config.DefaultAskTimeout, ""},
		{"its own askTimeout", protocol.Job{RunID: "r", Profile: "patient"}, &policy.Policy{Default: policy.Deny, Allow: []string{"Read"}}, 2 * time.Minute, ""},
		{"none", protocol.Job{RunID: "r", Profile: "plain"}, nil, 0, ""},
		{"a job's policy needs the profile's", protocol.Job{RunID: "r", Profile: "plain", Policy: &policy.Policy{Deny: []string{"Bash"}}}, nil, 0,
			`profile "plain" has no policy for a job's policy to narrow`},
	} {
		inv, err := c.Resolve(tc.job, "/b")
		if tc.err != "" {
			if !errors.Is(err, protocol.ErrNotAllowed) || !strings.HasPrefix(fmt.Sprint(err), tc.err) {
				t.Errorf("%s: %v, want ErrNotAllowed %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(inv.Policy, tc.want) || inv.AskTimeout != tc.askTimeout {
			t.Errorf("%s: %+v %v, %v; want %+v %v", tc.name, inv.Policy, inv.AskTimeout, err, tc.want, tc.askTimeout)
		}
	}
	// The invocation's policy shares nothing with the configuration.
	inv, _ := c.Resolve(protocol.Job{RunID: "r", Profile: "claude"}, "/b")
	inv.Policy.Allow[0] = "Bash"
	if c.Profiles["claude"].Policy.Allow[0] != "Read" {
		t.Fatal("Resolve returned a policy sharing the profile's rules")
	}
}

func TestResolveNeedsSelf(t *testing.T) {
	_, err := config.Default().Resolve(protocol.Job{RunID: "r", Profile: "demo"}, "")
	if err == nil || !strings.Contains(err.Error(), "{baton}") {
		t.Fatalf("err = %v; a {baton} command without the binary's path must fail", err)
	}
}

// TestResolveDisk: a job may lower the profile's limits.disk, never raise it.
func TestResolveDisk(t *testing.T) {
	c, err := config.Parse([]byte("profiles:\n  small:\n    command: [a]\n    limits: {disk: 64MiB}\n  dflt:\n    command: [a]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		profile string
		job     int64
		want    config.ByteSize
		ok      bool
	}{
		{"small", 0, 64 << 20, true},
		{"small", 32 << 20, 32 << 20, true},
		{"small", 64 << 20, 64 << 20, true},
		{"small", 64<<20 + 1, 0, false},
		{"dflt", 0, 0, true}, // the sandbox's default, 4GiB
		{"dflt", 1 << 30, 1 << 30, true},
		{"dflt", config.DefaultDiskBytes + 1, 0, false},
	} {
		inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: tc.profile, Limits: diskLimit(tc.job)}, "/b")
		switch {
		case tc.ok && (err != nil || inv.Limits.Disk != uint64(tc.want)):
			t.Errorf("%s, job disk %d: %d, %v; want %d", tc.profile, tc.job, inv.Limits.Disk, err, tc.want)
		case !tc.ok && !errors.Is(err, protocol.ErrNotAllowed):
			t.Errorf("%s, job disk %d: %v, want ErrNotAllowed", tc.profile, tc.job, err)
		}
	}
}

// diskLimit is a job's limits with disk n bytes (none for 0).
func diskLimit(n int64) map[string]string {
	if n == 0 {
		return nil
	}
	return map[string]string{protocol.JobLimitDisk: fmt.Sprint(n)}
}

// TestResolveStreamInputIsALine: on a stream stdin the job's input is the
// first turn, written as one line as every send is; on a once stdin it is
// the agent's whole input, byte for byte.
func TestResolveStreamInputIsALine(t *testing.T) {
	c, err := config.Parse([]byte(`
profiles:
  chat: {command: [cat], stdin: stream}
  once: {command: [cat]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		profile, input, want string
	}{
		{"chat", `{"type":"user"}`, "{\"type\":\"user\"}\n"},
		{"chat", "already a line\n", "already a line\n"},
		{"chat", "", ""},
		{"once", "no newline", "no newline"},
		{"once", "", ""},
	} {
		inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: tc.profile, Input: tc.input}, "/b")
		if err != nil {
			t.Fatal(err)
		}
		if string(inv.Input) != tc.want {
			t.Errorf("profile %s, input %q: agent reads %q, want %q", tc.profile, tc.input, inv.Input, tc.want)
		}
	}
}

// TestResolveSession: a session's job gets the profile's session block
// with its defaults, the command with its resume args placed after the
// profile command's leading words (the job's args then go where they
// would), and the setup; any other job gets none of them.
func TestResolveSession(t *testing.T) {
	c, err := config.Parse([]byte(`
profiles:
  codex:
    command: [codex, exec, --json, "-"]
    allowArgs: ["--model *"]
    session: {resumeArgs: [resume, --last], exclude: ["node_modules/**"]}
    setup: ["npm ci"]
  plain:
    command: [agent]
`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: "codex", Session: "s", Args: []string{"--model", "o3"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"codex", "exec", "resume", "--model", "o3", "--last", "--json", "-"}; !reflect.DeepEqual(inv.ResumeArgv, want) {
		t.Errorf("resume argv %q, want %q", inv.ResumeArgv, want)
	}
	if want := []string{"codex", "exec", "--model", "o3", "--json", "-"}; !reflect.DeepEqual(inv.Argv, want) {
		t.Errorf("argv %q, want %q", inv.Argv, want)
	}
	if inv.Session.MaxBytes != config.DefaultSessionMaxBytes || inv.Session.Keep != config.DefaultSessionKeep ||
		!reflect.DeepEqual(inv.Session.Exclude, []string{"node_modules/**"}) || !reflect.DeepEqual(inv.Setup, []string{"npm ci"}) {
		t.Errorf("session %+v, setup %q", inv.Session, inv.Setup)
	}
	plain, err := c.Resolve(protocol.Job{RunID: "r", Profile: "plain", Session: "s"}, "")
	if err != nil || !reflect.DeepEqual(plain.ResumeArgv, []string{"agent"}) || plain.Session.MaxBytes != config.DefaultSessionMaxBytes {
		t.Errorf("a profile without a session block: %+v, %v", plain, err)
	}
	none, err := c.Resolve(protocol.Job{RunID: "r", Profile: "codex"}, "")
	if err != nil || none.ResumeArgv != nil || none.Setup != nil || none.Session.MaxBytes != 0 {
		t.Errorf("a job of no session: %+v, %v", none, err)
	}
}

func TestValidateSession(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"session: {exclude: [/abs]}", "profiles.p.session.exclude[0]: outputs: bad glob"},
		{"session: {exclude: [\"~/../x\"]}", `profiles.p.session.exclude[0]`},
		{"session: {pauseAfter: 10s}", "profiles.p.session.pauseAfter: needs turnEnd"},
		{"session: {pauseAfter: 10ms}\n    turnEnd: {field: type, equals: result}\n    stdin: stream", "profiles.p.session.pauseAfter: 10ms is too short"},
		{"session: {resumeArgs: [\"\"]}", "profiles.p.session.resumeArgs[0]: must be a non-empty argument"},
		{"session: {keep: -1}", "profiles.p.session.keep: -1 must be between 1 and 1000"},
		{"setup: [\"  \"]", "profiles.p.setup[0]: must be a command"},
		{"session: {maxBytes: 2TiB}", "profiles.p.session.maxBytes"},
	} {
		_, err := config.Parse([]byte("profiles:\n  p:\n    command: [a]\n    " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("profiles:\n  p:\n    command: [a]\n    stdin: stream\n    turnEnd: {field: type, equals: result}\n    session: {pauseAfter: 2m, keep: 3, exclude: [\"~/.cache/**\"]}\n    setup: [\"make\"]\n")); err != nil {
		t.Errorf("a good session block: %v", err)
	}
}
