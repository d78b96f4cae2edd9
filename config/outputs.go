package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/outputs"
)

// Outputs is what a profile captures from a run's workspace when it ends
// (every terminal status but lost), into the outputs bucket.
type Outputs struct {
	// Diff asks for <runId>/diff.patch: the workspace against its seed.
	Diff bool `yaml:"diff" json:"diff,omitempty"`
	// Files are patterns of workspace files stored whole as
	// <runId>/files/<path>: "*" and "?" within a segment, "**" for any
	// number of segments ("out/**", "**/*.md").
	Files []string `yaml:"files" json:"files,omitempty"`
}

// Defaults of outputs.
const (
	// DefaultOutputsBytes is limits.outputs when a profile sets none: the
	// bytes one run may store, diff and files together.
	DefaultOutputsBytes ByteSize = outputs.DefaultMaxBytes
	// DefaultOutputsMaxAge is outputsMaxAge when not set: the outputs
	// bucket's TTL.
	DefaultOutputsMaxAge = 7 * 24 * time.Hour
	// minOutputsAge keeps outputs long enough to be fetched after a run.
	minOutputsAge = time.Minute
)

// OutputsTTL is the outputs bucket's TTL: OutputsMaxAge, or
// DefaultOutputsMaxAge when that is not set.
func (c *Config) OutputsTTL() time.Duration {
	if c.OutputsMaxAge > 0 {
		return c.OutputsMaxAge
	}
	return DefaultOutputsMaxAge
}

// Validate says what is wrong with o, if anything.
func (o Outputs) Validate() error {
	var errs []error
	for i, p := range o.Files {
		if err := outputs.CheckGlob(p); err != nil {
			errs = append(errs, fmt.Errorf("files[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// OutputsBytes is the bytes a run of these limits may store.
func (l Limits) OutputsBytes() int64 {
	if l.Outputs > 0 {
		return int64(l.Outputs)
	}
	return int64(DefaultOutputsBytes)
}
