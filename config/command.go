package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton/sandbox/runspec"
)

// ErrNoCommand: a profile's command is not a program its sandbox can start.
var ErrNoCommand = errors.New("config: command not found")

// FindCommand is the host file a run of the profile starts: its command's
// first word (self for the {baton} token) looked up as the sandbox will,
// on the profile's PATH, in the host's system directories the sandbox
// binds and the profile's mounts. An error wrapping ErrNoCommand says where
// it looked; a relative path with a slash names a file of the run's
// workspace, which exists only once a run has one, and is returned as is.
func (p Profile) FindCommand(self string) (string, error) {
	if len(p.Command) == 0 {
		return "", fmt.Errorf("%w: the profile has no command", ErrNoCommand)
	}
	name := p.Command[0]
	switch {
	case name == BatonToken: // the worker binds its own binary
		if err := executable(self); err != nil {
			return "", fmt.Errorf("%w: %s (%s): %w", ErrNoCommand, BatonToken, self, err)
		}
		return self, nil
	case filepath.IsAbs(name):
		host, ok := p.hostPath(name)
		if !ok {
			return "", fmt.Errorf("%w: %s is outside the sandbox (the host's %s and the profile's mounts)", ErrNoCommand, name, strings.Join(runspec.SystemDirs(), ", "))
		}
		if err := executable(host); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrNoCommand, name, err)
		}
		return host, nil
	case strings.Contains(name, "/"):
		return name, nil
	}
	pathVar := baseEnv["PATH"]
	if v, ok := p.Env["PATH"]; ok {
		pathVar = v
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(dir) {
			continue // the working directory is the run's, not known here
		}
		if host, ok := p.hostPath(path.Join(dir, name)); ok && executable(host) == nil {
			return host, nil
		}
	}
	return "", fmt.Errorf("%w: %q is in no directory of the sandbox's PATH (%s)", ErrNoCommand, name, pathVar)
}

// hostPath is the host file that the agent sees at p: the same path under
// a system directory, else under the mount whose destination holds it.
func (p Profile) hostPath(at string) (string, bool) {
	at = path.Clean(at)
	for _, d := range runspec.SystemDirs() {
		if at == d || strings.HasPrefix(at, d+"/") {
			return at, true
		}
	}
	for _, m := range p.Mounts {
		dest := runspec.Mount(m).Dest()
		if rest, ok := strings.CutPrefix(at, dest); ok && (rest == "" || rest[0] == '/') {
			return m.Source + rest, true
		}
	}
	return "", false
}

// executable says why the file at p cannot be started, if it cannot.
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}
