package protocol

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WorkspaceRef names an archive that seeds a run's workspace: an object of
// the workspaces bucket (Names.WorkspacesBucket), a tar, optionally
// gzipped, extracted into the workspace before the agent starts, under the
// job's files.
type WorkspaceRef struct {
	// Object is the archive's name in the workspaces bucket.
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

func (r *jsonReader) workspace(field string) (*WorkspaceRef, error) {
	tok, err := r.token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, wrongType(field, workspaceWant, jsonKind(tok))
	}
	ws := &WorkspaceRef{}
	seen := map[string]bool{}
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return ws, nil
		}
		key, _ := tok.(string)
		if err := workspaceKey(field, key, seen); err != nil {
			return nil, err
		}
		if ws.Object, err = r.str(field + ".object"); err != nil {
			return nil, err
		}
	}
}

func (r *msgpackReader) workspace(field string) (*WorkspaceRef, error) {
	if null, err := r.null(); err != nil || null {
		return nil, err
	}
	c, _ := r.peek() // null peeked already
	if !isMapCode(c) {
		return nil, wrongType(field, workspaceWant, msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeMapLen())
	if err != nil {
		return nil, err
	}
	ws := &WorkspaceRef{}
	seen := map[string]bool{}
	for range n {
		c, err := r.peek()
		if err != nil {
			return nil, err
		}
		if !isStringCode(c) {
			return nil, jobErr(ErrMalformedJob, "field %q keys must be strings, found %s", field, msgpackKind(c))
		}
		key, err := r.string()
		if err != nil {
			return nil, err
		}
		if err := workspaceKey(field, key, seen); err != nil {
			return nil, err
		}
		if ws.Object, err = r.str(field + ".object"); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

func workspaceKey(field, key string, seen map[string]bool) error {
	if key != "object" {
		return jobErr(ErrUnknownField, "field %q has no key %s (keys: object)", field, q(key))
	}
	if seen[key] {
		return jobErr(ErrMalformedJob, "field %q has the key %s twice", field, q(key))
	}
	seen[key] = true
	return nil
}
