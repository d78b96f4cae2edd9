package runspec

import (
	"errors"
	"fmt"
	"path/filepath"
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

// reservedTargets are the sandbox's own directories: a mount may not land
// on or under them.
var reservedTargets = []string{"/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

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
	for _, r := range reservedTargets {
		if dest == r || strings.HasPrefix(dest, r+"/") {
			return fmt.Errorf("target %s is under %s, which the sandbox provides", dest, r)
		}
	}
	return nil
}
