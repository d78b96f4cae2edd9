package protocol_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

// The validators are hand-written for start-up cost; these regexps are
// their specification.
var validators = []struct {
	name  string
	re    *regexp.Regexp
	valid func(string) bool
}{
	{"run id", regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`), protocol.ValidRunID},
	{"node id", regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`), protocol.ValidNodeID},
	{"env key", regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`), protocol.ValidEnvKey},
	{"profile name", regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`), protocol.ValidProfileName},
	{"prefix", regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`), func(s string) bool { _, err := protocol.NewNames(s); return err == nil && s != "" }},
}

var validatorInputs = []string{
	"", "a", "A-z_09", "run.1", "1ABC", "_x", "-x", ".x", "a b", "a\n", "\na", "é", "a\x00",
	"*", ">", "a.b.c", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65),
	strings.Repeat("b", 127), strings.Repeat("b", 128), strings.Repeat("b", 129), "_" + strings.Repeat("c", 127),
}

func TestValidators(t *testing.T) {
	for _, v := range validators {
		for _, in := range validatorInputs {
			if got, want := v.valid(in), v.re.MatchString(in); got != want {
				t.Errorf("%s %q: %v, want %v", v.name, in, got, want)
			}
		}
	}
}

func FuzzValidators(f *testing.F) {
	for _, in := range validatorInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, v := range validators {
			if got, want := v.valid(in), v.re.MatchString(in); got != want {
				t.Fatalf("%s %q: %v, want %v", v.name, in, got, want)
			}
		}
	})
}
