package config

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/sandbox/runspec"
)

// StdinMode is how a run's stdin pipe is fed (a profile's `stdin`).
type StdinMode = runspec.StdinMode

// Stdin modes.
const (
	StdinOnce   = runspec.StdinOnce
	StdinStream = runspec.StdinStream
)

// TurnEnd is a profile's `turnEnd`, e.g. {field: type, equals: result}.
type TurnEnd struct {
	Field  string `yaml:"field"`
	Equals string `yaml:"equals"`
}

// Input message bounds (maxInputBytes).
const (
	DefaultMaxInputBytes = 64 << 10
	// MaxInputBytesLimit keeps one input, with its journal record, well
	// under any server's max payload and the journal's max line.
	MaxInputBytesLimit = 256 << 10
)

// Interrupt is how `baton interrupt` stops an agent's current turn (a
// profile's `interrupt`): the scalar `signal` (the default: SIGINT to the
// agent's process group) or `{line: '<a line>'}`, written to its stdin,
// e.g. Claude Code's control_request interrupt. The run goes on either way.
type Interrupt struct {
	// Line is written to stdin; empty means SIGINT.
	Line string `json:"line,omitempty"`
}

const interruptForms = "interrupt is `signal` or {line: '<a line>'}"

// UnmarshalYAML accepts `signal` or `{line: ...}`.
func (in *Interrupt) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	switch node.Kind {
	case yaml.ScalarNode:
		if node.ShortTag() == "!!str" && node.Value == "signal" {
			*in = Interrupt{}
			return nil
		}
		return nodeErr(node, "%s, not %q", interruptForms, node.Value)
	case yaml.MappingNode:
		if len(node.Content) != 2 || resolveAlias(node.Content[0]).Value != "line" {
			return nodeErr(node, "%s: the mapping has exactly the key line", interruptForms)
		}
		v := resolveAlias(node.Content[1])
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || v.Value == "" {
			return nodeErr(v, "%s: line must be a non-empty string", interruptForms)
		}
		*in = Interrupt{Line: v.Value}
		return nil
	}
	return nodeErr(node, "%s", interruptForms)
}

func (in Interrupt) validate(stdin StdinMode) error {
	switch {
	case in.Line == "":
		return nil
	case stdin != StdinStream:
		return errors.New("an interrupt line is written to stdin, which needs stdin: stream")
	case strings.ContainsAny(in.Line, "\n\x00"):
		return errors.New("the line must be one line, without NUL bytes")
	}
	return nil
}
