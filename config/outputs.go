package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Outputs is what a profile captures from a run's workspace when it ends
// (every terminal status but lost), into the outputs bucket.
type Outputs runspec.Outputs

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

// narrow applies a job's outputs to the profile's, refusing a job that
// asks for more than the profile captures.
func (o Outputs) narrow(profile string, j *protocol.JobOutputs) (Outputs, error) {
	out := Outputs{Diff: o.Diff, Files: slices.Clone(o.Files)}
	if j == nil {
		return out, nil
	}
	if j.Diff != nil {
		if *j.Diff && !o.Diff {
			return Outputs{}, reject(protocol.ErrNotAllowed, "outputs.diff: profile %q captures no diff", profile)
		}
		out.Diff = *j.Diff
	}
	if len(j.Files) > 0 {
		if len(o.Files) == 0 {
			return Outputs{}, reject(protocol.ErrNotAllowed, "outputs.files: profile %q captures no files", profile)
		}
		for i, p := range j.Files {
			if err := outputs.CheckGlob(p); err != nil {
				return Outputs{}, reject(protocol.ErrInvalidJob, "outputs.files[%d]: %v", i, err)
			}
		}
		out.Within = slices.Clone(j.Files)
	}
	return out, nil
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
