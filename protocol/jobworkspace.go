package protocol

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WorkspaceRef says what seeds a run's workspace before the agent
// starts: exactly one of Object, an archive of the workspaces stream
// (Names.WorkspacesStream) by its SHA-256, a tar, optionally gzipped,
// extracted under the job's files; or Git, a repository cloned into it.
type WorkspaceRef struct {
	// Object is the archive's name, sha256-<hex>.tar[.gz].
	Object string `json:"object,omitempty" msgpack:"object,omitempty"`
	// Git is a repository cloned into the workspace.
	Git *GitSource `json:"git,omitempty" msgpack:"git,omitempty"`
}

// GitSource is a repository a run's workspace is cloned from, inside the
// sandbox before the agent starts, through the run's egress: its host must
// be on the profile's allowlist, and a profile secret with header "basic"
// for that host is its credential, which the agent never holds.
type GitSource struct {
	// URL is the repository's https:// (or http://) URL, without a
	// credential.
	URL string `json:"url" msgpack:"url"`
	// Ref is a branch, a tag, a full ref (refs/…) or a commit id; empty:
	// the repository's HEAD.
	Ref string `json:"ref,omitempty" msgpack:"ref,omitempty"`
	// Depth is how many commits of history are fetched; 0: 1, a shallow
	// clone.
	Depth int `json:"depth,omitempty" msgpack:"depth,omitempty"`
}

// Bounds of a GitSource.
const (
	MaxGitURLBytes = 2048
	MaxGitRefBytes = 255
	MaxGitDepth    = 1 << 20
)

// DepthOrDefault is the depth the clone uses: 1 unless Depth sets more.
func (g GitSource) DepthOrDefault() int { return max(g.Depth, 1) }

// MaxWorkspaceObjectBytes bounds a workspace archive's object name.
const MaxWorkspaceObjectBytes = 255

// ValidWorkspaceObject reports whether name may name a workspace archive:
// 1 to MaxWorkspaceObjectBytes bytes of printable UTF-8.
func ValidWorkspaceObject(name string) bool {
	if name == "" || len(name) > MaxWorkspaceObjectBytes || !utf8.ValidString(name) {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}

func validateWorkspace(w *WorkspaceRef, files map[string]string) error {
	if w == nil {
		return nil
	}
	switch {
	case w.Object == "" && w.Git == nil:
		return jobErr(ErrInvalidJob, "field \"workspace\" needs \"object\" (the archive's name in the workspaces bucket) or \"git\" (a repository to clone)")
	case w.Object != "" && w.Git != nil:
		return jobErr(ErrInvalidJob, "field \"workspace\" has both \"object\" and \"git\": a workspace is seeded from one of them")
	case w.Git != nil:
		return validateGit(*w.Git, files)
	}
	if !ValidWorkspaceObject(w.Object) {
		return jobErr(ErrInvalidJob, "workspace.object %s must be 1 to %d bytes of printable UTF-8", q(w.Object), MaxWorkspaceObjectBytes)
	}
	return nil
}

func validateGit(g GitSource, files map[string]string) error {
	if why := CheckGitURL(g.URL); why != "" {
		return jobErr(ErrInvalidJob, "workspace.git.url %s %s", q(RedactGitURL(g.URL)), why)
	}
	if why := checkGitRef(g.Ref); why != "" {
		return jobErr(ErrInvalidJob, "workspace.git.ref %s of repository %s %s", q(g.Ref), q(g.URL), why)
	}
	if g.Depth < 0 || g.Depth > MaxGitDepth {
		return jobErr(ErrInvalidJob, "workspace.git.depth of repository %s is %d; it must be between 0 (a shallow clone, depth 1) and %d", q(g.URL), g.Depth, MaxGitDepth)
	}
	for p := range files {
		if !strings.HasPrefix(p, HomeFilePrefix) {
			// git checks out into an empty directory only; a seed file
			// in the home is fine.
			return jobErr(ErrInvalidJob, "files[%s] is in the workspace, which repository %s is cloned into: only files under %s (the agent's home) go with \"workspace.git\"", q(p), q(g.URL), HomeFilePrefix)
		}
	}
	return nil
}

// RedactGitURL is u without the credential it may carry, for messages:
// a rejected URL's reason must not spread what it should not have held.
func RedactGitURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		if i, j := strings.Index(u, "://"), strings.LastIndex(u, "@"); i >= 0 && j > i {
			return u[:i+3] + "…@" + u[j+1:]
		}
		return u
	}
	p.User = nil
	s := p.String()
	return strings.Replace(s, "://", "://…@", 1)
}

// CheckGitURL says what is wrong with u as a workspace repository's URL,
// or "": an absolute http(s) URL with a host, without a credential (the
// profile's secrets hold it, out of the agent's reach and of the logs) or
// a fragment, of printable ASCII.
func CheckGitURL(u string) string {
	switch {
	case u == "":
		return "is missing: the repository's https:// URL"
	case len(u) > MaxGitURLBytes:
		return "is longer than " + strconv.Itoa(MaxGitURLBytes) + " bytes"
	case strings.IndexFunc(u, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0:
		return "must be printable ASCII without spaces (percent-encode the rest)"
	}
	p, err := url.Parse(u)
	if err != nil {
		return "is not a URL"
	}
	switch {
	case p.Scheme != "https" && p.Scheme != "http":
		return "must be https:// (or http://): git's other transports (ssh, git, file, ext) are not cloned through the egress"
	case p.User != nil:
		return "must not carry a credential (user@ or user:password@): a profile secret with header \"basic\" for its host supplies it, out of the agent's reach"
	case p.Host == "" || p.Hostname() == "":
		return "has no host"
	case p.Opaque != "":
		return "must be an absolute URL (https://host/path)"
	case p.Fragment != "" || strings.Contains(u, "#"):
		return "must not have a fragment"
	}
	return ""
}

var hexCommit = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// IsCommitID reports whether ref is a full commit id (SHA-1 or SHA-256).
func IsCommitID(ref string) bool { return hexCommit.MatchString(ref) }

// checkGitRef says what is wrong with ref as a ref to clone, or "": git's
// check-ref-format rules, and never a word git could take for an option.
func checkGitRef(ref string) string {
	switch {
	case ref == "":
		return ""
	case len(ref) > MaxGitRefBytes:
		return "is longer than " + strconv.Itoa(MaxGitRefBytes) + " bytes"
	case ref[0] == '-':
		return "must not start with \"-\""
	case strings.IndexFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) }) >= 0:
		return "must not contain spaces, control characters or any of ~^:?*[\\"
	case !utf8.ValidString(ref):
		return "is not valid UTF-8"
	case strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") || ref == "@":
		return "must not contain \"..\", \"@{\" or \"//\", nor be \"@\""
	case strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock"):
		return "must not start or end with \"/\", nor end with \".\" or \".lock\""
	}
	for c := range strings.SplitSeq(ref, "/") {
		if strings.HasPrefix(c, ".") {
			return "must not have a component starting with \".\""
		}
	}
	return ""
}

const workspaceWant = `an object like {"object": "sha256-….tar.gz"} or {"git": {"url": "https://…", "ref": "main"}}`

const gitWant = `an object like {"url": "https://…", "ref": "main", "depth": 1}`

// decodeWorkspace reads the workspace field's value in either encoding.
func decodeWorkspace(r fieldReader, field string) (*WorkspaceRef, error) {
	ws := &WorkspaceRef{}
	present, err := r.object(field, workspaceWant, []string{"object", "git"}, func(key string) error {
		var err error
		if key == "git" {
			ws.Git, err = decodeGit(r, field+".git")
			return err
		}
		ws.Object, err = r.str(field + ".object")
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return ws, nil
}

func decodeGit(r fieldReader, field string) (*GitSource, error) {
	g := &GitSource{}
	present, err := r.object(field, gitWant, []string{"url", "ref", "depth"}, func(key string) error {
		var err error
		switch key {
		case "url":
			g.URL, err = r.str(field + ".url")
		case "ref":
			g.Ref, err = r.str(field + ".ref")
		default:
			var n int64
			n, err = r.integer(field + ".depth")
			// Validate bounds it; a value past int's range must not wrap
			// into them.
			g.Depth = int(max(min(n, MaxGitDepth+1), -1))
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return g, nil
}
