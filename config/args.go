package config

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ArgPolicy is a profile's allowArgs: which args a job may add, and where
// they go.
//
//   - false (the default): none.
//   - a list of entries: each job arg must match one. An entry is a flag
//     pattern ("--verbose", "--model=*") or a flag pattern and a value
//     pattern ("--model *"), which takes the next job arg as the flag's
//     value (or the form "--model=opus"). "*" matches any text, but a value
//     pattern never matches an arg that starts with "-". The args go right
//     after the command's leading words (the program and its subcommands)
//     and before the profile's first flag, so with a parser where the last
//     occurrence wins (commander, as in claude) the profile's flags win, and
//     with one that refuses repeats (clap, as in codex) the run fails rather
//     than runs with the job's value. "--" is never allowed: it would turn
//     the profile's flags into operands.
//   - true: any args, appended after the whole command as before; only for
//     publishers trusted with every flag of the agent.
type ArgPolicy struct {
	Any      bool
	Patterns []string
}

// AnyArgs is allowArgs: true.
var AnyArgs = ArgPolicy{Any: true}

const argPolicyForms = "allowArgs must be true, false or a list of flags like [--verbose, --model *, --effort=*]"

// UnmarshalYAML accepts a boolean or a list of strings.
func (a *ArgPolicy) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	switch {
	case node.Kind == yaml.ScalarNode:
		var b bool
		if err := node.Decode(&b); err != nil {
			return nodeErr(node, "%s, not %q", argPolicyForms, node.Value)
		}
		*a = ArgPolicy{Any: b}
		return nil
	case node.Kind == yaml.SequenceNode:
		out := ArgPolicy{Patterns: []string{}}
		for _, e := range node.Content {
			e = resolveAlias(e)
			if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" {
				return nodeErr(e, "%s", argPolicyForms)
			}
			out.Patterns = append(out.Patterns, e.Value)
		}
		*a = out
		return nil
	}
	return nodeErr(node, "%s", argPolicyForms)
}

// Allows reports whether a job may add any arg at all.
func (a ArgPolicy) Allows() bool { return a.Any || len(a.Patterns) > 0 }

// Validate says what is wrong with the entries.
func (a ArgPolicy) Validate() error {
	var errs []error
	for i, p := range a.Patterns {
		words := strings.Fields(p)
		switch {
		case len(words) == 0 || len(words) > 2 || strings.Join(words, " ") != p:
			errs = append(errs, fmt.Errorf("[%d]: %q must be a flag, or a flag and a value pattern separated by one space", i, p))
		case !strings.HasPrefix(words[0], "-") || words[0] == "-" || words[0] == "--" || strings.HasPrefix(words[0], "-*") || strings.HasPrefix(words[0], "--*"):
			errs = append(errs, fmt.Errorf("[%d]: %q must start with a flag name like --model (not \"--\", and no pattern in the name)", i, p))
		}
	}
	return errors.Join(errs...)
}

// Check reports the first job arg the policy refuses, if any.
func (a ArgPolicy) Check(args []string) error {
	if a.Any || len(args) == 0 {
		return nil
	}
	if len(a.Patterns) == 0 {
		return errors.New("args not allowed: the profile does not set allowArgs")
	}
	for i := 0; i < len(args); {
		n := a.match(args[i:])
		if n == 0 {
			return fmt.Errorf("arg %d %q not allowed (allowed: %s)", i, args[i], strings.Join(a.Patterns, ", "))
		}
		i += n
	}
	return nil
}

// match is how many leading args one entry accepts (0: none).
func (a ArgPolicy) match(args []string) int {
	arg := args[0]
	if arg == "--" {
		return 0
	}
	for _, p := range a.Patterns {
		flag, value, pair := strings.Cut(p, " ")
		switch {
		case !pair && glob(flag, arg):
			return 1
		case pair && arg == flag && len(args) > 1 && valueMatch(value, args[1]):
			return 2
		case pair && strings.HasPrefix(arg, flag+"=") && valueMatch(value, arg[len(flag)+1:]):
			return 1
		}
	}
	return 0
}

func valueMatch(pattern, v string) bool { return !strings.HasPrefix(v, "-") && glob(pattern, v) }

// glob matches s against pattern, where "*" stands for any text.
func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// place puts a job's args into command: for a list, after the command's
// leading words and before its first flag; for true, at the end.
func (a ArgPolicy) place(command, args []string) []string {
	at := len(command)
	if !a.Any {
		at = 1
		for at < len(command) && !strings.HasPrefix(command[at], "-") {
			at++
		}
		at = min(at, len(command))
	}
	out := make([]string, 0, len(command)+len(args))
	out = append(out, command[:at]...)
	out = append(out, args...)
	return append(out, command[at:]...)
}
