package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// JobOutputs narrows what a run's capture stores: a job may turn the
// profile's diff off and keep only the profile's files that also match its
// own patterns, never capture more than its profile.
type JobOutputs struct {
	// Diff false drops the profile's diff; true keeps it (and is refused
	// when the profile has none).
	Diff *bool `json:"diff,omitempty" msgpack:"diff,omitempty"`
	// Files are patterns a captured file must also match.
	Files []string `json:"files,omitempty" msgpack:"files,omitempty"`
}

// Bounds of a job's outputs patterns.
const (
	MaxOutputsPatterns     = 32
	MaxOutputsPatternBytes = 256
)

// validateOutputs says what is wrong with o's shape; the patterns' syntax is
// the configuration's to check (config.Resolve).
func validateOutputs(o *JobOutputs) error {
	if o == nil {
		return nil
	}
	if len(o.Files) > MaxOutputsPatterns {
		return jobErr(ErrInvalidJob, "outputs.files has %d patterns, limit %d", len(o.Files), MaxOutputsPatterns)
	}
	for i, p := range o.Files {
		if p == "" || len(p) > MaxOutputsPatternBytes || !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
			return jobErr(ErrInvalidJob, "outputs.files[%d] must be a pattern of 1 to %d bytes of UTF-8", i, MaxOutputsPatternBytes)
		}
	}
	return nil
}

// normalizeOutputs drops an outputs object that narrows nothing, so a job
// compares equal to its re-encoding.
func normalizeOutputs(j *Job) {
	if j.Outputs == nil {
		return
	}
	if len(j.Outputs.Files) == 0 {
		j.Outputs.Files = nil
	}
	if j.Outputs.Diff == nil && j.Outputs.Files == nil {
		j.Outputs = nil
	}
}

const outputsWant = `an object like {"diff": false, "files": ["out/**"]}`

func (r *jsonReader) outputs(field string) (*JobOutputs, error) {
	o := &JobOutputs{}
	present, err := r.object(field, outputsWant, []string{"diff", "files"}, func(key string) error {
		if key == "files" {
			var err error
			o.Files, err = r.strList(field + ".files")
			return err
		}
		tok, err := r.token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case bool:
			o.Diff = &v
		case nil:
		default:
			return wrongType(field+".diff", "true or false", jsonKind(tok))
		}
		return nil
	})
	if !present || err != nil {
		return nil, err
	}
	return o, nil
}

func (r *msgpackReader) outputs(field string) (*JobOutputs, error) {
	o := &JobOutputs{}
	present, err := r.object(field, outputsWant, []string{"diff", "files"}, func(key string) error {
		if key == "files" {
			var err error
			o.Files, err = r.strList(field + ".files")
			return err
		}
		if null, err := r.null(); err != nil || null {
			return err
		}
		c, _ := r.peek()
		if c != msgpcode.True && c != msgpcode.False {
			return wrongType(field+".diff", "true or false", msgpackKind(c))
		}
		v, err := r.dec.DecodeBool()
		if err != nil {
			return r.fail(err)
		}
		o.Diff = &v
		return nil
	})
	if !present || err != nil {
		return nil, err
	}
	return o, nil
}

// object reads the object value of field, whose keys may be only keys,
// each once, calling value for each to read its value. It reports false
// for null.
func (r *jsonReader) object(field, want string, keys []string, value func(key string) error) (bool, error) {
	tok, err := r.token()
	if err != nil || tok == nil {
		return false, err
	}
	if tok != json.Delim('{') {
		return false, wrongType(field, want, jsonKind(tok))
	}
	seen := map[string]bool{}
	for {
		tok, err := r.token()
		if err != nil {
			return false, err
		}
		if tok == json.Delim('}') {
			return true, nil
		}
		key, _ := tok.(string)
		if err := objectKey(field, key, keys, seen); err != nil {
			return false, err
		}
		if err := value(key); err != nil {
			return false, err
		}
	}
}

// object is jsonReader.object for msgpack.
func (r *msgpackReader) object(field, want string, keys []string, value func(key string) error) (bool, error) {
	if null, err := r.null(); err != nil || null {
		return false, err
	}
	c, _ := r.peek() // null peeked already
	if !isMapCode(c) {
		return false, wrongType(field, want, msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeMapLen())
	if err != nil {
		return false, err
	}
	seen := map[string]bool{}
	for range n {
		c, err := r.peek()
		if err != nil {
			return false, err
		}
		if !isStringCode(c) {
			return false, jobErr(ErrMalformedJob, "field %q keys must be strings, found %s", field, msgpackKind(c))
		}
		key, err := r.string()
		if err != nil {
			return false, err
		}
		if err := objectKey(field, key, keys, seen); err != nil {
			return false, err
		}
		if err := value(key); err != nil {
			return false, err
		}
	}
	return true, nil
}

func objectKey(field, key string, keys []string, seen map[string]bool) error {
	if !slices.Contains(keys, key) {
		return jobErr(ErrUnknownField, "field %q has no key %s (keys: %s)", field, q(key), strings.Join(keys, ", "))
	}
	if seen[key] {
		return jobErr(ErrMalformedJob, "field %q has the key %s twice", field, q(key))
	}
	seen[key] = true
	return nil
}
