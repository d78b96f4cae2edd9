package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Defaults and bounds of a profile's toolLimits.
const (
	DefaultToolCalls   = 100
	DefaultToolBytes   = 64 << 10
	DefaultToolTimeout = 30 * time.Second
	maxTools           = 64
	maxToolBytes       = 512 << 10 // under the smallest max_payload baton accepts, with headers
	maxToolTimeout     = time.Hour
)

// ToolLimits bound a run's host tool calls; zero fields take the defaults.
type ToolLimits struct {
	// Calls is how many calls a run may make (default 100).
	Calls int `yaml:"calls"`
	// Bytes bounds one call's arguments and one answer (default 64 KiB).
	Bytes ByteSize `yaml:"bytes"`
	// Timeout bounds the wait for one answer (default 30s).
	Timeout time.Duration `yaml:"timeout"`
}

// validateTools reports the problems of p's tools and toolLimits.
func (p *Profile) validateTools() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	if len(p.Tools) > maxTools {
		bad("tools", "%d tools; at most %d", len(p.Tools), maxTools)
	}
	for i, name := range p.Tools {
		switch {
		case !journal.ValidToolName(name):
			bad(fmt.Sprintf("tools[%d]", i), "%q must match [A-Za-z0-9_-]{1,%d} (one NATS subject token)", name, journal.MaxToolName)
		case slices.Index(p.Tools, name) != i:
			bad(fmt.Sprintf("tools[%d]", i), "%q is listed twice", name)
		}
	}
	l := p.ToolLimits
	if l.Calls < 0 {
		bad("toolLimits.calls", "%d must not be negative", l.Calls)
	}
	if l.Bytes > maxToolBytes {
		bad("toolLimits.bytes", "%d is more than %d", uint64(l.Bytes), maxToolBytes)
	}
	if l.Timeout < 0 || l.Timeout > maxToolTimeout {
		bad("toolLimits.timeout", "%s must be between 0 and %s", l.Timeout, maxToolTimeout)
	}
	if len(p.Tools) > 0 && p.Pool > 0 {
		// A prestarted sandbox is built before its run's profile is known
		// to it: the baton binary `baton mcp` needs would not be bound.
		bad("tools", "a profile with tools has no pool")
	}
	return errors.Join(errs...)
}

// toolsSpec is what p's tools are in a run's spec: nil without tools.
func (p *Profile) toolsSpec() *runspec.Tools {
	if len(p.Tools) == 0 {
		return nil
	}
	t := &runspec.Tools{Names: slices.Clone(p.Tools), MaxCalls: p.ToolLimits.Calls,
		MaxBytes: int(p.ToolLimits.Bytes), Timeout: p.ToolLimits.Timeout}
	if t.MaxCalls == 0 {
		t.MaxCalls = DefaultToolCalls
	}
	if t.MaxBytes == 0 {
		t.MaxBytes = DefaultToolBytes
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultToolTimeout
	}
	return t
}
