package runspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Mount binds a host path into the sandbox.
type Mount struct {
	// Source is the host path, absolute. It must exist when a run starts
	// and be reachable by the sandbox's uid.
	Source string `json:"source"`
	// Target is where the agent sees it (default: Source).
	Target string `json:"target,omitempty"`
	// Writable lets the agent write through the mount; default read-only.
	Writable bool `json:"writable,omitempty"`
}

// Dest is where the agent sees the mount.
func (m Mount) Dest() string {
	if m.Target == "" {
		return m.Source
	}
	return m.Target
}

// The sandbox's own directories, the one list of them: the host's system
// directories it binds read-only at their own paths, and the kernel
// filesystems it mounts. A mount may not land on or under either, nor may
// a run directory (which keeps its path inside) lie under them or /etc.
var (
	systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	kernelDirs = []string{"/proc", "/dev", "/sys"}
)

// SystemDirs are the host directories the sandbox binds read-only (or
// recreates, when symlinks) at their own paths.
func SystemDirs() []string { return slices.Clone(systemDirs) }

// OwnDirs are every directory the sandbox provides: SystemDirs, its kernel
// filesystems and /etc.
func OwnDirs() []string { return slices.Concat(systemDirs, kernelDirs, []string{"/etc"}) }

// Validate says what is wrong with the mount, if anything.
func (m Mount) Validate() error {
	for _, p := range []string{m.Source, m.Target} {
		if p != "" && (!filepath.IsAbs(p) || filepath.Clean(p) != p || strings.IndexByte(p, 0) >= 0) {
			return fmt.Errorf("%q must be an absolute, clean path", p)
		}
	}
	if m.Source == "" {
		return errors.New("source must not be empty")
	}
	dest := m.Dest()
	if dest == "/" || dest == "/etc" || dest == "/tmp" {
		return fmt.Errorf("target %s is the sandbox's own; mount below it", dest)
	}
	for _, r := range slices.Concat(kernelDirs, systemDirs) {
		if dest == r || strings.HasPrefix(dest, r+"/") {
			return fmt.Errorf("target %s is under %s, which the sandbox provides", dest, r)
		}
	}
	return nil
}

// Where the agent finds its workspace and its home (HOME, unless the
// profile sets one) inside the sandbox, whatever the run, node or
// prestarted chain: an agent that keys its state by the working
// directory (Claude Code's conversations) finds it again in the next run
// of a session.
const (
	WorkspacePath = "/workspace"
	HomePath      = "/home/agent"
)
