package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
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
)

var (
	// ErrInvalidSpec wraps every reason Validate refuses a spec.
	ErrInvalidSpec = errors.New("sandbox: invalid spec")
	// ErrNetworkUnsupported refuses an egress allowlist until the runner
	// can enforce one: nothing runs with less isolation than it asked for.
	ErrNetworkUnsupported = errors.New("sandbox: network allowlists need the sandbox issue: not supported yet")
)

// maxSpecBytes bounds the spec file a stage reads.
const maxSpecBytes = 16 << 20

// Validate reports whether the runner chain can run s as given.
func (s Spec) Validate() error {
	if !protocol.ValidRunID(s.RunID) {
		return fmt.Errorf("%w: run id %q must match [A-Za-z0-9_-]{1,128}", ErrInvalidSpec, s.RunID)
	}
	if err := validRunDir(s.RunDir); err != nil {
		return err
	}
	if err := validArgv(s.Argv); err != nil {
		return err
	}
	if err := validEnv(s.Env); err != nil {
		return err
	}
	// The sentinel must be one the journal's readers recognise.
	line := journal.Sentinel{Nonce: s.Nonce, Reason: journal.ReasonExit}.Line()
	if _, ok := journal.ParseSentinel(line[:len(line)-1], s.Nonce); !ok {
		return fmt.Errorf("%w: nonce %q cannot end a journal (want 1 to 256 of [A-Za-z0-9-_.~+/=])", ErrInvalidSpec, s.Nonce)
	}
	if s.KillGrace < 0 {
		return fmt.Errorf("%w: kill grace %v is negative", ErrInvalidSpec, s.KillGrace)
	}
	if s.SandboxUID < 0 || s.SandboxUID > maxID || s.SandboxGID < 0 || s.SandboxGID > maxID {
		return fmt.Errorf("%w: sandbox uid/gid %d/%d out of range", ErrInvalidSpec, s.SandboxUID, s.SandboxGID)
	}
	seen := make(map[string]string, len(s.Files))
	for name := range s.Files {
		p, err := seedPath(name)
		if err != nil {
			return err
		}
		if other, dup := seen[p]; dup {
			return fmt.Errorf("%w: seed files %q and %q name the same file", ErrInvalidSpec, other, name)
		}
		seen[p] = name
	}
	if len(s.Network.Allow) > 0 {
		return fmt.Errorf("%w (allow: %s)", ErrNetworkUnsupported, strings.Join(s.Network.Allow, ", "))
	}
	return nil
}

// maxID is the largest uid or gid a user namespace can map (2^32-2).
const maxID = 1<<32 - 2

func validRunDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("%w: run directory %q must be an absolute, clean path", ErrInvalidSpec, dir)
	}
	// The sandbox hides the run directory's parent; hiding / is not an option.
	if filepath.Dir(dir) == "/" {
		return fmt.Errorf("%w: run directory %q must not sit directly under /", ErrInvalidSpec, dir)
	}
	return nil
}

func validArgv(argv []string) error {
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

func validEnv(env []string) error {
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("%w: environment entry %q is not KEY=value", ErrInvalidSpec, kv)
		}
	}
	return nil
}

// seedPath cleans a seed file's name, refusing anything but a relative
// path that stays inside the workspace.
func seedPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 || !filepath.IsLocal(name) {
		return "", fmt.Errorf("%w: seed file %q must be a relative path inside the workspace", ErrInvalidSpec, name)
	}
	p := filepath.Clean(name)
	if p == "." {
		return "", fmt.Errorf("%w: seed file %q names the workspace itself", ErrInvalidSpec, name)
	}
	return p, nil
}

// sandboxIDs are the host uid and gid the agent runs as, given the
// runner's effective ids: a root runner maps the agent to the spec's
// sandbox ids (never 0), anyone else to themselves.
func (s Spec) sandboxIDs(euid, egid int) (uid, gid int) {
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

func (s Spec) killGrace() time.Duration {
	if s.KillGrace == 0 {
		return DefaultKillGrace
	}
	return s.KillGrace
}

// decodeSpec parses a spec file strictly and validates it.
func decodeSpec(b []byte) (Spec, error) {
	var s Spec
	if err := decodeStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// childSpec is what runner-inner hands runner-inner-child: the spec
// without the nonce and seed files, which nothing in the sandbox may see.
type childSpec struct {
	RunDir string   `json:"runDir"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
}

func (s Spec) child() childSpec { return childSpec{RunDir: s.RunDir, Argv: s.Argv, Env: s.Env} }

func decodeChildSpec(b []byte) (childSpec, error) {
	var c childSpec
	if err := decodeStrict(b, &c); err != nil {
		return childSpec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := validRunDir(c.RunDir); err != nil {
		return childSpec{}, err
	}
	if err := validArgv(c.Argv); err != nil {
		return childSpec{}, err
	}
	if err := validEnv(c.Env); err != nil {
		return childSpec{}, err
	}
	return c, nil
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(b []byte, v any) error {
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
