package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// WorkspaceRef names an archive that seeds a run's workspace: one of the
// workspaces stream (Names.WorkspacesStream), by its SHA-256, a tar,
// optionally gzipped, extracted into the workspace before the agent
// starts, under the job's files.
type WorkspaceRef struct {
	// Object is the archive's name, sha256-<hex>.tar[.gz].
	Object string `json:"object" msgpack:"object"`
}

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

func validateWorkspace(w *WorkspaceRef) error {
	if w == nil {
		return nil
	}
	if w.Object == "" {
		return jobErr(ErrInvalidJob, "field \"workspace\" needs \"object\": the archive's name in the workspaces bucket")
	}
	if !ValidWorkspaceObject(w.Object) {
		return jobErr(ErrInvalidJob, "workspace.object %s must be 1 to %d bytes of printable UTF-8", q(w.Object), MaxWorkspaceObjectBytes)
	}
	return nil
}

const workspaceWant = `an object like {"object": "sha256-….tar.gz"}`

// decodeWorkspace reads the workspace field's value in either encoding.
func decodeWorkspace(r fieldReader, field string) (*WorkspaceRef, error) {
	ws := &WorkspaceRef{}
	present, err := r.object(field, workspaceWant, []string{"object"}, func(string) error {
		var err error
		ws.Object, err = r.str(field + ".object")
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return ws, nil
}
