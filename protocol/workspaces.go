package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strconv"
)

// A workspace archive is stored in the workspaces stream by its content:
// its SHA-256 (64 lower-case hex digits, H) names it, and it is cut into
// chunks of WorkspaceChunkBytes, chunk i (from 0) published on
// WorkspaceChunkSubject(H, i), the last one shorter or full. Its size, in
// decimal, is published last on WorkspaceSizeSubject(H): the upload is
// complete. The stream keeps one message per subject and refuses a second
// (and rollups, deletes and purges), so nothing stored is ever replaced;
// whoever publishes a subject first owns it, and the worker checks the
// whole digest while it extracts, so a chunk of other content fails the
// run, never seeds it.

// WorkspaceChunkBytes is the length of every chunk of an archive but its
// last.
const WorkspaceChunkBytes = 128 << 10

// WorkspacesSubjects are the subjects of the workspaces stream.
func (n Names) WorkspacesSubjects() string { return n.prefix + ".workspaces.>" }

// WorkspaceChunkSubject is where chunk i of the archive of SHA-256 digest
// (hex) is stored.
func (n Names) WorkspaceChunkSubject(digest string, i int) string {
	return n.prefix + ".workspaces." + digest + "." + strconv.Itoa(i)
}

// WorkspaceSizeSubject is where the size of the archive of SHA-256 digest
// (hex) is stored, once its chunks are.
func (n Names) WorkspaceSizeSubject(digest string) string {
	return n.prefix + ".workspaces." + digest + ".size"
}

// WorkspaceChunks is how many chunks an archive of size bytes has.
func WorkspaceChunks(size uint64) int {
	return int((size + WorkspaceChunkBytes - 1) / WorkspaceChunkBytes)
}

// workspaceName matches an archive's name: its SHA-256, then .tar or
// .tar.gz (which says nothing the worker relies on: it tells a gzipped
// archive by its magic bytes).
var workspaceName = regexp.MustCompile(`^sha256-([0-9a-f]{64})\.tar(\.gz)?$`)

// WorkspaceObjectName is the name of an archive of SHA-256 sum, gzipped
// or not.
func WorkspaceObjectName(sum [sha256.Size]byte, gzipped bool) string {
	name := "sha256-" + hex.EncodeToString(sum[:]) + ".tar"
	if gzipped {
		name += ".gz"
	}
	return name
}

// WorkspaceDigest returns the SHA-256 (hex) a workspace archive's name
// says, and whether it is a name of the stream's form at all.
func WorkspaceDigest(name string) (string, bool) {
	m := workspaceName.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// WorkspaceDigestHeader is digest (hex) as "SHA-256=<base64url>", the form
// run specs keep and object digests take.
func WorkspaceDigestHeader(digest string) string {
	sum, _ := hex.DecodeString(digest)
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum)
}

// ParseWorkspaceSize reads a size record: a decimal without sign or
// leading zeros.
func ParseWorkspaceSize(b []byte) (uint64, bool) {
	s := string(b)
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, false
	}
	return n, true
}
