package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

// argsConfig has a claude-like profile whose job args are listed, one
// with a subcommand (codex-like), and one that takes any args.
func argsConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(`
profiles:
  claude:
    command: [claude, -p, --output-format, stream-json, --verbose, --permission-mode, plan]
    allowArgs: [--model *, "--max-turns=*", --debug, "--effort *-high"]
  codex:
    command: [codex, exec, --json, --sandbox, read-only]
    allowArgs: [--model *]
  shell:
    command: [/bin/sh, -c]
    allowArgs: true
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAllowArgsList(t *testing.T) {
	c := argsConfig(t)
	for _, tc := range []struct {
		profile string
		args    []string
		want    []string // nil: refused
		why     string
	}{
		{"claude", nil, []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan"}, ""},
		// Before the profile's first flag: the profile's flags come last
		// and win where the last occurrence wins.
		{"claude", []string{"--model", "opus", "--debug"},
			[]string{"claude", "--model", "opus", "--debug", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan"}, ""},
		{"claude", []string{"--model=opus", "--max-turns=3", "--effort", "very-high"},
			[]string{"claude", "--model=opus", "--max-turns=3", "--effort", "very-high", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan"}, ""},
		// After the subcommand, which its flags must follow.
		{"codex", []string{"--model", "o3"}, []string{"codex", "exec", "--model", "o3", "--json", "--sandbox", "read-only"}, ""},
		// true: anything, at the end, as before.
		{"shell", []string{"echo hi"}, []string{"/bin/sh", "-c", "echo hi"}, ""},
		{"claude", []string{"--output-format", "text"}, nil, `arg 0 "--output-format" not allowed`},
		{"claude", []string{"--permission-mode=bypassPermissions"}, nil, `arg 0 "--permission-mode=bypassPermissions" not allowed`},
		{"claude", []string{"--mcp-config", "x.json"}, nil, `"--mcp-config" not allowed`},
		{"claude", []string{"--", "--debug"}, nil, `arg 0 "--" not allowed`},
		{"claude", []string{"--debug", "--"}, nil, `arg 1 "--" not allowed`},
		// A flag's value may not be a flag: it would eat the profile's.
		{"claude", []string{"--model"}, nil, `arg 0 "--model" not allowed`},
		{"claude", []string{"--model", "--dangerously-skip-permissions"}, nil, `arg 0 "--model" not allowed`},
		{"claude", []string{"--model=-x"}, nil, `not allowed`},
		{"claude", []string{"--effort", "low"}, nil, `arg 0 "--effort" not allowed`},
		{"claude", []string{"opus"}, nil, `arg 0 "opus" not allowed`},
		{"claude", []string{"--debugx"}, nil, `"--debugx" not allowed`},
		{"codex", []string{"--model", "o3", "--sandbox", "danger-full-access"}, nil, `arg 2 "--sandbox" not allowed (allowed: --model *)`},
	} {
		inv, err := c.Resolve(protocol.Job{RunID: "r", Profile: tc.profile, Args: tc.args}, "/b")
		switch {
		case tc.want != nil && err != nil:
			t.Errorf("%s %q: %v", tc.profile, tc.args, err)
		case tc.want != nil && !slices.Equal(inv.Argv, tc.want):
			t.Errorf("%s %q: argv %q, want %q", tc.profile, tc.args, inv.Argv, tc.want)
		case tc.want == nil && (!errors.Is(err, protocol.ErrNotAllowed) || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("%s %q: err %v, want ErrNotAllowed: %s", tc.profile, tc.args, err, tc.why)
		}
	}
}

func TestAllowArgsParse(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want config.ArgPolicy
		err  string
	}{
		{"false", config.ArgPolicy{}, ""},
		{"true", config.AnyArgs, ""},
		{"[--verbose, --model *]", config.ArgPolicy{Patterns: []string{"--verbose", "--model *"}}, ""},
		{"[]", config.ArgPolicy{Patterns: []string{}}, ""},
		{"maybe", config.ArgPolicy{}, `allowArgs must be true, false or a list of flags`},
		{"{a: b}", config.ArgPolicy{}, `allowArgs must be true, false or a list`},
		{"[[--x]]", config.ArgPolicy{}, `allowArgs must be true, false or a list`},
		{"[model]", config.ArgPolicy{}, `allowArgs[0]: "model" must start with a flag name`},
		{"['--']", config.ArgPolicy{}, `allowArgs[0]: "--" must start with a flag name`},
		{"['--*']", config.ArgPolicy{}, `no pattern in the name`},
		{"['-*']", config.ArgPolicy{}, `no pattern in the name`},
		{"['--a  b']", config.ArgPolicy{}, `separated by one space`},
		{"['--a b c']", config.ArgPolicy{}, `separated by one space`},
		{"['']", config.ArgPolicy{}, `must be a flag`},
	} {
		c, err := config.Parse([]byte("profiles:\n  x:\n    command: [a]\n    allowArgs: " + tc.yaml + "\n"))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.yaml, err)
		case tc.err == "" && !(c.Profiles["x"].AllowArgs.Any == tc.want.Any && slices.Equal(c.Profiles["x"].AllowArgs.Patterns, tc.want.Patterns)):
			t.Errorf("%s: %+v, want %+v", tc.yaml, c.Profiles["x"].AllowArgs, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %s", tc.yaml, err, tc.err)
		}
	}
}
