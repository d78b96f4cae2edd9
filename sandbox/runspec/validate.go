package runspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/runid"
	"github.com/batonhq/baton/journal"
)

// Defaults for a Spec's zero values.
const (
	// DefaultSandboxUID and DefaultSandboxGID ("nobody", "nogroup") are the
	// host ids a root runner maps the agent to when the spec leaves them 0:
	// the agent never runs as host root.
	DefaultSandboxUID = 65534
	DefaultSandboxGID = 65534
	// DefaultKillGrace is the time between SIGTERM and SIGKILL when the
	// spec leaves KillGrace 0.
	DefaultKillGrace = 10 * time.Second
	// DefaultAgentUID and DefaultAgentGID are the agent's ids inside the
	// sandbox when the spec leaves them 0: not root, which some agent
	// CLIs refuse to run as.
	DefaultAgentUID = 1000
	DefaultAgentGID = 1000
)

// ErrInvalidSpec wraps every reason Validate refuses a spec.
var ErrInvalidSpec = errors.New("sandbox: invalid spec")

// Validate reports whether the runner chain can run s as given.
func (s Spec) Validate() error {
	if !runid.Valid(s.RunID) {
		return fmt.Errorf("%w: run id %q must match [A-Za-z0-9_-]{1,128}", ErrInvalidSpec, s.RunID)
	}
	if err := ValidateRunDir(s.RunDir); err != nil {
		return err
	}
	if err := ValidateArgv(s.Argv); err != nil {
		return err
	}
	if s.Baton != "" && !CleanAbs(s.Baton) {
		return fmt.Errorf("%w: baton binary %q must be an absolute, clean path", ErrInvalidSpec, s.Baton)
	}
	if err := ValidateEnv(s.Env); err != nil {
		return err
	}
	if s.Git != nil {
		if err := s.Git.Validate(s.Env); err != nil {
			return err
		}
	}
	// The sentinel must be one the journal's readers recognise.
	line := journal.Sentinel{Nonce: s.Nonce, Reason: journal.ReasonExit}.Line()
	if _, ok := journal.ParseSentinel(line[:len(line)-1], s.Nonce); !ok {
		return fmt.Errorf("%w: nonce %q cannot end a journal (want 1 to 256 of [A-Za-z0-9-_.~+/=])", ErrInvalidSpec, s.Nonce)
	}
	if s.KillGrace < 0 {
		return fmt.Errorf("%w: kill grace %v is negative", ErrInvalidSpec, s.KillGrace)
	}
	if s.SandboxUID < 0 || s.SandboxUID > MaxID || s.SandboxGID < 0 || s.SandboxGID > MaxID {
		return fmt.Errorf("%w: sandbox uid/gid %d/%d out of range", ErrInvalidSpec, s.SandboxUID, s.SandboxGID)
	}
	if s.AgentUID < 0 || s.AgentUID > MaxID || s.AgentGID < 0 || s.AgentGID > MaxID {
		return fmt.Errorf("%w: agent uid/gid %d/%d out of range", ErrInvalidSpec, s.AgentUID, s.AgentGID)
	}
	if err := s.Network.Validate(); err != nil {
		return fmt.Errorf("%w: network: %w", ErrInvalidSpec, err)
	}
	for i, m := range s.Mounts {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("%w: mounts[%d]: %w", ErrInvalidSpec, i, err)
		}
	}
	if err := s.Limits.Validate(); err != nil {
		return fmt.Errorf("%w: limits: %w", ErrInvalidSpec, err)
	}
	if c := s.CgroupParent; c != "" && (!filepath.IsAbs(c) || filepath.Clean(c) != c) {
		return fmt.Errorf("%w: cgroup parent %q must be an absolute, clean path", ErrInvalidSpec, c)
	}
	seen := make(map[string]string, len(s.Files))
	for name := range s.Files {
		p, err := SeedPath(name)
		if err != nil {
			return err
		}
		if other, dup := seen[p]; dup {
			return fmt.Errorf("%w: seed files %q and %q name the same file", ErrInvalidSpec, other, name)
		}
		seen[p] = name
	}
	return nil
}

// MaxID is the largest uid or gid a user namespace can map (2^32-2).
const MaxID = 1<<32 - 2

// ValidateRunDir refuses a run directory the sandbox cannot hide or keep
// at its path: one that is not absolute and clean, sits directly under /,
// or lies under a directory the sandbox provides (OwnDirs).
func ValidateRunDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("%w: run directory %q must be an absolute, clean path", ErrInvalidSpec, dir)
	}
	// The sandbox hides the run directory's parent; hiding / is not an option.
	if filepath.Dir(dir) == "/" {
		return fmt.Errorf("%w: run directory %q must not sit directly under /", ErrInvalidSpec, dir)
	}
	// The workspace keeps its path inside, where these are the sandbox's.
	for _, d := range OwnDirs() {
		if strings.HasPrefix(dir, d+"/") {
			return fmt.Errorf("%w: run directory %q must not be under %s, which the sandbox provides", ErrInvalidSpec, dir, d)
		}
	}
	return nil
}

// ValidateArgv refuses an empty command line or one holding a NUL byte.
func ValidateArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("%w: argv is empty", ErrInvalidSpec)
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: argv %q holds a NUL byte", ErrInvalidSpec, a)
		}
	}
	return nil
}

// ValidateEnv refuses an environment entry that is not KEY=value.
func ValidateEnv(env []string) error {
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("%w: environment entry %q is not KEY=value", ErrInvalidSpec, kv)
		}
	}
	return nil
}

// SeedPath cleans a seed file's name, refusing anything but a relative
// path that stays inside the workspace.
func SeedPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 || !filepath.IsLocal(name) {
		return "", fmt.Errorf("%w: seed file %q must be a relative path inside the workspace", ErrInvalidSpec, name)
	}
	p := filepath.Clean(name)
	if p == "." {
		return "", fmt.Errorf("%w: seed file %q names the workspace itself", ErrInvalidSpec, name)
	}
	return p, nil
}

// SandboxIDs are the host uid and gid the agent runs as, given the
// runner's effective ids: a root runner maps the agent to the spec's
// sandbox ids (never 0), anyone else to themselves.
func (s Spec) SandboxIDs(euid, egid int) (uid, gid int) {
	if euid != 0 {
		return euid, egid
	}
	uid, gid = s.SandboxUID, s.SandboxGID
	if uid == 0 {
		uid = DefaultSandboxUID
	}
	if gid == 0 {
		gid = DefaultSandboxGID
	}
	return uid, gid
}

// AgentIDs are the agent's ids inside the sandbox.
func (s Spec) AgentIDs() (uid, gid int) {
	uid, gid = s.AgentUID, s.AgentGID
	if uid == 0 {
		uid = DefaultAgentUID
	}
	if gid == 0 {
		gid = DefaultAgentGID
	}
	return uid, gid
}

// Grace is KillGrace, or DefaultKillGrace when it is 0.
func (s Spec) Grace() time.Duration {
	if s.KillGrace == 0 {
		return DefaultKillGrace
	}
	return s.KillGrace
}

// Decode parses a spec file's contents strictly and validates them.
func Decode(b []byte) (Spec, error) {
	var s Spec
	if err := DecodeStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// DecodeStrict decodes exactly one JSON value with no unknown fields: how
// every spec of the runner chain is read.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// CleanAbs reports whether p is an absolute, clean path.
func CleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }
