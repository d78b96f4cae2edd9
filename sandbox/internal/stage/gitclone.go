package stage

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/sandbox/runspec"
)

// gitCloneTimeout bounds a workspace's clone, all its git commands
// together: as long as an archive's extraction may take.
const gitCloneTimeout = 10 * time.Minute

// ErrGitClone: the workspace's repository could not be cloned; the
// message names it and says what git said.
var ErrGitClone = errors.New("workspace repository not cloned")

// gitGuards is the configuration every git command of a clone runs with,
// given in the environment (GIT_CONFIG_COUNT), never in argv or a file
// the repository could bring: no hooks, no fsmonitor, no credential
// helper or prompt, http(s) only (no ext::, file://, ssh), objects
// checked as they arrive, no submodules. Filters and diff drivers named
// by a repository's .gitattributes exist only in configuration, which
// the repository cannot set: none runs.
var gitGuards = [][2]string{
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"credential.helper", ""},
	{"protocol.allow", "never"},
	{"protocol.https.allow", "always"},
	{"protocol.http.allow", "always"},
	{"transfer.fsckObjects", "true"},
	{"fetch.recurseSubmodules", "false"},
	{"submodule.recurse", "false"},
	{"advice.detachedHead", "false"},
	{"init.defaultBranch", "main"},
}

// gitEnv is the environment of a clone's git commands: the agent's (its
// PATH, HOME, proxy and CA variables) without any GIT_ variable but the
// CA bundle's (chain.CAEnv), then the guards; with a secret, the Basic credential of its placeholder as an
// extra header, which the proxy swaps for the value on the way out.
func gitEnv(agentEnv []string, g *runspec.Git) []string {
	env := make([]string, 0, len(agentEnv)+8)
	placeholder := ""
	for _, kv := range agentEnv {
		k, v, _ := strings.Cut(kv, "=")
		if g.Secret != "" && k == g.Secret {
			placeholder = v
		}
		if !strings.HasPrefix(k, "GIT_") || k == "GIT_SSL_CAINFO" {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ALLOW_PROTOCOL=https:http", "GIT_PROTOCOL_FROM_USER=0")
	cfg := gitGuards
	if placeholder != "" {
		cred := base64.StdEncoding.EncodeToString([]byte(runspec.GitUser + ":" + placeholder))
		cfg = append(cfg[:len(cfg):len(cfg)], [2]string{"http.extraHeader", "Authorization: Basic " + cred})
	}
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
}

// gitSteps are the clone's git commands, run in the empty workspace: a
// repository whose origin is the URL, the ref's commits to depth
// (HEAD's when no ref is named), its tree checked out on a detached HEAD.
func gitSteps(g *runspec.Git) [][]string {
	ref := g.Ref
	if ref == "" {
		ref = "HEAD"
	}
	return [][]string{
		{"init", "-q"},
		{"remote", "add", "origin", g.URL},
		{"fetch", "-q", "--no-tags", "--no-recurse-submodules", "--depth=" + strconv.Itoa(g.Depth), "origin", ref},
		{"checkout", "-q", "--detach", "FETCH_HEAD"},
	}
}

// gitClonedNote starts the line on which the exec stage tells the init
// the commit it cloned, before it executes the agent.
const gitClonedNote = "cloned "

// cloneWorkspace clones g into dir, the empty workspace, with git found
// on env's PATH, and returns the commit checked out. Every error wraps
// ErrGitClone and names the repository.
func cloneWorkspace(ctx context.Context, g *runspec.Git, dir string, env []string) (string, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrGitClone, g.URL, fmt.Sprintf(format, a...))
	}
	git, err := lookPath("git", env, dir)
	if err != nil {
		return "", fail("git is not in the sandbox (%v): the profile's image or mounts must provide it", err)
	}
	env = gitEnv(env, g)
	ctx, cancel := context.WithTimeout(ctx, gitCloneTimeout)
	defer cancel()
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = dir, env
		return bounded.Output(ctx, gitCloneTimeout, cmd)
	}
	for _, step := range gitSteps(g) {
		out, err := run(step...)
		if errors.Is(err, bounded.ErrTimeout) {
			return "", fail("not cloned within %v", gitCloneTimeout)
		}
		if err != nil {
			return "", fail("git %s: %s", step[0], gitSaid(out, err, g))
		}
	}
	out, err := run("rev-parse", "--verify", "HEAD^{commit}")
	id := string(bytes.TrimSpace(out))
	if err != nil || !runspec.IsCommitID(id) {
		return "", fail("no commit checked out: %s", gitSaid(out, err, g))
	}
	return id, nil
}

// gitSaid is the gist of a failed git command's output: its last fatal
// or error line, with the reason a missing ref has in plain words.
func gitSaid(out []byte, err error, g *runspec.Git) string {
	last := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "fatal: ") || strings.HasPrefix(line, "error: ") {
			last = line
		}
	}
	if strings.Contains(last, "couldn't find remote ref") || strings.Contains(last, "not our ref") {
		return fmt.Sprintf("ref %q does not exist (%s)", g.Ref, last)
	}
	// The workspace's filesystem is full, or a file passed fsize (which
	// is limits.disk unless the profile sets it): SIGXFSZ is signal 25.
	if s := string(out); strings.Contains(s, "No space left on device") || strings.Contains(s, "File size limit exceeded") ||
		strings.Contains(s, "died of signal 25") {
		return fmt.Sprintf("the repository is larger than the workspace may hold (limits.disk) (%s)", last)
	}
	if last == "" {
		return err.Error()
	}
	if len(last) > 512 {
		last = last[:512] + "…"
	}
	return last
}
