package protocol

import (
	"encoding/json"
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
	tok, err := r.token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, wrongType(field, outputsWant, jsonKind(tok))
	}
	o := &JobOutputs{}
	seen := map[string]bool{}
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return o, nil
		}
		key, _ := tok.(string)
		if err := outputsKey(field, key, seen); err != nil {
			return nil, err
		}
		switch key {
		case "diff":
			tok, err := r.token()
			if err != nil {
				return nil, err
			}
			switch v := tok.(type) {
			case bool:
				o.Diff = &v
			case nil:
			default:
				return nil, wrongType(field+".diff", "true or false", jsonKind(tok))
			}
		case "files":
			if o.Files, err = r.strList(field + ".files"); err != nil {
				return nil, err
			}
		}
	}
}

func (r *msgpackReader) outputs(field string) (*JobOutputs, error) {
	if null, err := r.null(); err != nil || null {
		return nil, err
	}
	c, _ := r.peek() // null peeked already
	if !isMapCode(c) {
		return nil, wrongType(field, outputsWant, msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeMapLen())
	if err != nil {
		return nil, err
	}
	o := &JobOutputs{}
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
		if err := outputsKey(field, key, seen); err != nil {
			return nil, err
		}
		switch key {
		case "diff":
			if null, err := r.null(); err != nil {
				return nil, err
			} else if null {
				continue
			}
			c, _ := r.peek()
			if c != msgpcode.True && c != msgpcode.False {
				return nil, wrongType(field+".diff", "true or false", msgpackKind(c))
			}
			v, err := r.dec.DecodeBool()
			if err != nil {
				return nil, r.fail(err)
			}
			o.Diff = &v
		case "files":
			if o.Files, err = r.strList(field + ".files"); err != nil {
				return nil, err
			}
		}
	}
	return o, nil
}

func outputsKey(field, key string, seen map[string]bool) error {
	if key != "diff" && key != "files" {
		return jobErr(ErrUnknownField, "field %q has no key %s (keys: diff, files)", field, q(key))
	}
	if seen[key] {
		return jobErr(ErrMalformedJob, "field %q has the key %s twice", field, q(key))
	}
	seen[key] = true
	return nil
}
