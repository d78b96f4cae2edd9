package stage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

// defaultPath is searched for argv[0] when the spec's environment has no
// PATH, as a POSIX shell would.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// agentEnv is the agent's environment: the spec's (the last entry for a
// key wins, as with os/exec), HOME defaulting to home, and PWD naming the
// workspace it starts in.
func agentEnv(env []string, workspace, home string) []string {
	idx := make(map[string]int, len(env)+2)
	out := make([]string, 0, len(env)+2)
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range env {
		set(kv)
	}
	if _, ok := idx["HOME"]; !ok {
		set("HOME=" + home)
	}
	set("PWD=" + workspace)
	return out
}

var (
	errNotFound      = errors.New("not found")
	errNotExecutable = errors.New("not executable")
)

// lookPath resolves argv[0] as the agent will be started: a name with a
// slash is taken as is (relative to dir), any other is searched on the
// environment's PATH. Relative PATH entries are skipped: the workspace is
// the agent's to write, so "." would let it choose what runs.
func lookPath(file string, env []string, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("agent %q: %w", file, err)
		}
		return p, nil
	}
	path, ok := chain.EnvValue(env, "PATH")
	if !ok {
		path = defaultPath
	}
	var denied error
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, file)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if denied == nil && errors.Is(err, errNotExecutable) {
			denied = fmt.Errorf("agent %q: %s: %w", file, p, err)
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("agent %q: %w in PATH %q", file, errNotFound, path)
}

func executable(p string) error {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errNotFound
	case err != nil:
		return fmt.Errorf("%w: %w", errNotExecutable, err)
	case st.IsDir() || !st.Mode().IsRegular():
		return fmt.Errorf("%w: not a regular file", errNotExecutable)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%w: no execute permission", errNotExecutable)
	}
	return nil
}

// startExitCode is the shell's convention for an agent that could not be
// started: 127 when it does not exist, 126 when it cannot be executed.
func startExitCode(err error) int {
	if errors.Is(err, errNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// keptEnv lists the variables whose values the state file may show; the
// rest are redacted, since jobs pass secrets in the environment.
var keptEnv = map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TERM": true, "USER": true, "SHELL": true, "TZ": true}

// redactEnv is env for diagnostics: keys kept, secret values hidden.
func redactEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if keptEnv[k] || strings.HasPrefix(k, "LC_") {
			out[i] = kv
		} else {
			out[i] = k + "=<redacted>"
		}
	}
	return out
}
