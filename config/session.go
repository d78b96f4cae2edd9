package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/outputs"
)

// Session is what a profile's runs keep between the runs of a session
// (jobs naming one): the workspace and the agent's home are checkpointed
// at each run's end and restored before the next, on any node.
type Session struct {
	// Exclude are globs of paths left out of checkpoints: a workspace
	// path as it is ("node_modules/**"), a home path after "~/"
	// ("~/.cache/**").
	Exclude []string `yaml:"exclude"`
	// MaxBytes bounds a checkpoint's tree, its files' bytes (default
	// 1 GiB): past it the checkpoint fails and the session keeps its
	// previous head.
	MaxBytes ByteSize `yaml:"maxBytes"`
	// ResumeArgs go into the command of a session's run that continues
	// from a checkpoint, after the command's leading words (e.g.
	// [--continue] for Claude Code; [resume, --last] for codex exec).
	ResumeArgs []string `yaml:"resumeArgs"`
	// PauseAfter checkpoints a run that has waited for input that long
	// and ends its sandbox (status "paused"); the session's next run, or
	// a send to the session, continues it. Needs turnEnd.
	PauseAfter time.Duration `yaml:"pauseAfter"`
	// Keep is how many checkpoints a session keeps to fork from (default
	// 10).
	Keep int `yaml:"keep"`
}

// Defaults of sessions.
const (
	DefaultSessionMaxBytes ByteSize = 1 << 30
	DefaultSessionKeep              = 10
	// DefaultSessionsMaxAge is sessionsMaxAge when not set: how long a
	// session no run used is kept.
	DefaultSessionsMaxAge = 30 * 24 * time.Hour
	// DefaultCheckpointsMaxBytes bounds the checkpoints bucket when
	// checkpointsMaxBytes is not set (reserved in the server's store, as workspacesMaxBytes is).
	DefaultCheckpointsMaxBytes ByteSize = 2 << 30
	// minPauseAfter keeps a pause from ending every short wait.
	minPauseAfter = time.Second
	maxSetup      = 32
)

// OrDefault is s with its defaults set (a profile without a session
// block has them all).
func (s *Session) OrDefault() Session {
	var out Session
	if s != nil {
		out = *s
		out.Exclude, out.ResumeArgs = slices.Clone(s.Exclude), slices.Clone(s.ResumeArgs)
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = DefaultSessionMaxBytes
	}
	if out.Keep == 0 {
		out.Keep = DefaultSessionKeep
	}
	return out
}

// SessionsTTL is how long an unused session is kept: SessionsMaxAge, or
// DefaultSessionsMaxAge.
func (c *Config) SessionsTTL() time.Duration {
	if c.SessionsMaxAge > 0 {
		return c.SessionsMaxAge
	}
	return DefaultSessionsMaxAge
}

// CheckpointsBytes bounds the checkpoints bucket: CheckpointsMaxBytes, or
// DefaultCheckpointsMaxBytes.
func (c *Config) CheckpointsBytes() int64 {
	if c.CheckpointsMaxBytes > 0 {
		return int64(c.CheckpointsMaxBytes)
	}
	return int64(DefaultCheckpointsMaxBytes)
}

// validate reports the problems of a profile's session block and setup,
// each starting with its key below the profile's.
func (p Profile) validateSession() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if s := p.Session; s != nil {
		for i, g := range s.Exclude {
			if err := outputs.CheckGlob(strings.TrimPrefix(g, "~/")); err != nil {
				bad(fmt.Sprintf("session.exclude[%d]", i), "%v", err)
			}
		}
		if s.MaxBytes > 1<<40 {
			bad("session.maxBytes", "%d is more than 1 TiB", uint64(s.MaxBytes))
		}
		for i, a := range s.ResumeArgs {
			if a == "" || strings.IndexByte(a, 0) >= 0 {
				bad(fmt.Sprintf("session.resumeArgs[%d]", i), "must be a non-empty argument without NUL bytes")
			}
		}
		switch {
		case s.PauseAfter < 0:
			bad("session.pauseAfter", "%s must not be negative", s.PauseAfter)
		case s.PauseAfter > 0 && s.PauseAfter < minPauseAfter:
			bad("session.pauseAfter", "%s is too short; it must be at least %s", s.PauseAfter, minPauseAfter)
		case s.PauseAfter > 0 && p.TurnEnd == nil:
			bad("session.pauseAfter", "needs turnEnd (a run waits for input only between turns)")
		}
		if s.Keep < 0 || s.Keep > 1000 {
			bad("session.keep", "%d must be between 1 and 1000 (0 for %d)", s.Keep, DefaultSessionKeep)
		}
	}
	if len(p.Setup) > maxSetup {
		bad("setup", "%d commands; at most %d", len(p.Setup), maxSetup)
	}
	for i, c := range p.Setup {
		if strings.TrimSpace(c) == "" || strings.IndexByte(c, 0) >= 0 {
			bad(fmt.Sprintf("setup[%d]", i), "must be a command, without NUL bytes")
		}
	}
	return errors.Join(errs...)
}
