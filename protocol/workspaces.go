package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
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
//
// The form is "sha256-<64 lower-case hex>.tar" or the same with ".gz"
// (which says nothing the worker relies on: it tells a gzipped archive by
// its magic bytes). Hand-written rather than a regexp, which would cost
// every runner process its package's start-up (see validChars).
func WorkspaceDigest(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "sha256-")
	if !ok || len(rest) < 64 {
		return "", false
	}
	digest, ext := rest[:64], rest[64:]
	if ext != ".tar" && ext != ".tar.gz" {
		return "", false
	}
	for i := 0; i < len(digest); i++ {
		if c := digest[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return digest, true
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
